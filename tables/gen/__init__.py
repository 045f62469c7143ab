"""Generate every copy of tables/loopwarden.toml, or check that none is stale (`--check`)."""
