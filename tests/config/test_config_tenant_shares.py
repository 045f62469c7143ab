"""loopwarden.tenantMaxRuns / tenantMaxStreams: global only, 0 (an equal share) by
default, and refusals that name the field."""
from __future__ import annotations

import pytest

from loopwarden_server.config import ConfigError, load_config_text
from loopwarden_server.config.tables import DaemonLimits


def refusal(text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config_text(text)
    return str(caught.value)


def test_unset_shares_are_zero_an_equal_split():
    assert DaemonLimits(tenant_max_runs=0, tenant_max_streams=0) == load_config_text("{}").daemon_limits


def test_the_global_block_sets_both_shares():
    config = load_config_text("{loopwarden: {tenantMaxRuns: 5000, tenantMaxStreams: 40}}")
    assert DaemonLimits(tenant_max_runs=5000, tenant_max_streams=40) == config.daemon_limits


def test_a_share_out_of_range_is_refused_naming_the_field():
    assert refusal("{loopwarden: {tenantMaxRuns: -1}}").startswith("loopwarden.tenantMaxRuns:")
    assert refusal('{loopwarden: {tenantMaxStreams: "many"}}').startswith("loopwarden.tenantMaxStreams:")


def test_an_agent_cannot_set_a_tenant_share():
    """Shares are the daemon's, per tenant: an agent's block does not accept them."""
    message = refusal('{agents: {list: [{id: "a", loopwarden: {tenantMaxRuns: 3}}]}}')
    assert message.startswith("agents.list[0].loopwarden.tenantMaxRuns: unknown key")
