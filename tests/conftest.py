"""Hypothesis profiles: CI runs a fixed, derandomized set so a landing never depends on luck;
locally the examples vary run to run. LOOPWARDEN_HYPOTHESIS_PROFILE=long digs deeper."""
from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None)
settings.register_profile("long", deadline=None, max_examples=2000)
settings.load_profile(os.environ.get("LOOPWARDEN_HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))
