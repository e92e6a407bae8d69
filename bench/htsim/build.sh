#!/bin/sh
# Build htsim's RoCE simulator (htsim_roce) from a source checkout of Broadcom/csg-htsim you
# provide, with its own Makefiles (sim/ for libhtsim.a, then sim/datacenter/ for htsim_roce),
# in place.
# Downloads nothing. Then: invoke bench --only sim --htsim SRC/sim/datacenter/htsim_roce
#   usage: bench/htsim/build.sh SRC    (SRC: the checkout, the folder holding sim/)
set -eu

if [ $# -ne 1 ]; then
    echo "usage: $0 SRC  (a checkout of htsim: the folder holding sim/)" >&2
    exit 2
fi
src=$1
if [ ! -f "$src/sim/Makefile" ] || [ ! -f "$src/sim/datacenter/Makefile" ]; then
    echo "$0: $src is not an htsim checkout: no sim/Makefile or sim/datacenter/Makefile" >&2
    exit 2
fi
missing=""
for tool in make g++; do
    command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
done
if [ -n "$missing" ]; then
    echo "$0: missing:$missing (on Debian/Ubuntu: apt-get install make g++)" >&2
    exit 2
fi
jobs=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
# the library only (sim/'s "all" also builds its tests and every datacenter binary)
make -C "$src/sim" -j"$jobs" libhtsim.a
make -C "$src/sim/datacenter" -j"$jobs" htsim_roce
binary=$(cd "$src/sim/datacenter" && pwd)/htsim_roce
echo "built $binary"
echo "compare: invoke bench --only sim --htsim $binary"
