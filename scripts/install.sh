#!/usr/bin/env bash
# Install what rocelab needs on a Debian/Ubuntu machine: system tools (as root) and the
# project itself in .venv. Safe to repeat: it skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

# frr: zebra + bgpd for BGP labs (BGP_NEIGHBOR); Debian installs it without starting anything
PACKAGES=(iproute2 iputils-ping ethtool procps tcpdump tshark iperf3 python3-venv python3-pip frr)
# the compiled build (compiled.py), made below: installed as root, else rocelab runs pure;
# the codec links zlib (scripts/compile.py)
BUILD_PACKAGES=(gcc python3-dev zlib1g-dev)

wanted=("${PACKAGES[@]}")
if [ "$(id -u)" -eq 0 ]; then
    wanted+=("${BUILD_PACKAGES[@]}")
fi
missing=()
for p in "${wanted[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "install: missing Debian packages (${missing[*]}); run as root to install them" >&2
        exit 1
    fi
    echo "install: apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The distribution's python3 (built with PGO/LTO, and the one python3-venv is for) runs the
# switch model ~13% faster than an unoptimised one that may come first on PATH.
if [ -z "${PYTHON:-}" ]; then
    PYTHON=python3
    [ -x /usr/bin/python3 ] && PYTHON=/usr/bin/python3
fi
stamp=.venv/.rocelab-installed
want="$(sha256sum pyproject.toml | cut -d' ' -f1) $("$PYTHON" -c 'import sys; print(sys.executable)')"
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "install: python environment in .venv ($PYTHON)"
    "$PYTHON" -m venv --clear .venv
    .venv/bin/python -m pip install -q --upgrade pip >/dev/null
    .venv/bin/python -m pip install -q -e '.[test]'
    echo "$want" > "$stamp"
fi

# The compiled build of the per-frame classes (compiled.py), unless it is current: rocelab
# runs the pure-Python reference without it (same results, slower); a build that fails is
# a bug (tests/unit/test_compiled.py fails where one can be made), not a failed install
.venv/bin/python scripts/compile.py || echo "install: continuing with pure Python" >&2
