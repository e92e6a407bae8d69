#!/usr/bin/env bash
# The first quick-start command: install, bring up the default lab, show that it works, and
# run its checks (RoCE v1/v2 domains and classes, then the congestion checks: ~3 minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
LAB=${1:-roce-v2-leafspine}

scripts/install.sh
.venv/bin/invoke lab.down "$LAB" >/dev/null   # a fresh start when repeated
.venv/bin/invoke lab.up "$LAB"
.venv/bin/invoke lab.status --name "$LAB"
.venv/bin/invoke lab.pingall --name "$LAB"
# ends with what was decided, the report to read first (results/<lab>-<time>/summary.md)
# and, for a check that could not decide, the command that decides it
code=0
.venv/bin/invoke check "$LAB" || code=$?
echo
echo "The lab stays up. Try: .venv/bin/invoke lab.exec h1 -- ping -c3 10.1.2.13"
echo "Take it down with:    .venv/bin/invoke lab.down $LAB"
exit "$code"
