#!/usr/bin/env bash
# The second quick-start command (and what CI runs): install, then the whole test suite.
# As root the namespace integration tests run too; without root they skip and say so.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install.sh
exec .venv/bin/python -m pytest tests "$@"
