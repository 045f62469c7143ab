#!/usr/bin/env bash
# Installs the non-Python tools the test suite drives. Idempotent; caches under .cache/tools.
set -euo pipefail
