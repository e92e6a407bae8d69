#!/bin/sh
# rocelab-switch entrypoint: wait for the wires, then become the switch agent.
#
# containerlab starts a container first and plugs its links (eth1, eth2, ...) in afterwards,
# so the agent cannot open its ports at start. ROCELAB_PORTS (set by rocelab's containerlab
# runtime and by lab.export) names the ports to wait for, each with its PORT entry
# ("eth1=Ethernet0,eth2=Ethernet8", as rocelab mapped them); without it the ports are the ethN
# present once their list has stopped changing for ROCELAB_SETTLE_S seconds, and the agent maps
# them itself, with the lanemap.ini bound where SONiC-VS reads it if there is one. Either way
# the wait is bounded by ROCELAB_PORT_WAIT_S.
#
# ROCELAB_MTUS ("eth1=9100,eth2=9100", set by lab.export) gives each port its link's MTU where
# the links themselves lose it (clabernetes drops a link's mtu:); a port that refuses it stops
# the container.
#
# ROCELAB_TIME_SCALE (from the node's rocelab.time-scale label) paces the ports at speed / S;
# without it the agent runs unpaced. ROCELAB_ECN_MARKING (label rocelab.ecn-marking) says
# where WRED marks: dequeue (the agent's default) or enqueue.
#
# A platform's pg_profile_lookup.ini bound where SONiC images have it
# (/usr/share/sonic/hwsku/pg_profile_lookup.ini, or ROCELAB_PG_LOOKUP) gives the lossless PGs
# the config leaves out, as buffermgrd does at boot.
#
# The agent's control socket and log go to /run/rocelab (agent.sock, agent.log): rocelab binds
# that folder from the lab's state folder, so lab.status and fabric.client reach the agent.
set -eu

CONFIG=${ROCELAB_CONFIG:-/etc/sonic/config_db.json}
PG_LOOKUP=${ROCELAB_PG_LOOKUP:-/usr/share/sonic/hwsku/pg_profile_lookup.ini}
CONTROL_DIR=${ROCELAB_CONTROL_DIR:-/run/rocelab}
WAIT_S=${ROCELAB_PORT_WAIT_S:-300}
SETTLE_S=${ROCELAB_SETTLE_S:-3}
NAME=${HOSTNAME:-$(hostname)}
LANEMAP=${ROCELAB_LANEMAP:-/usr/share/sonic/hwsku/lanemap.ini}

wired() {
    ls /sys/class/net | grep -E '^eth[1-9][0-9]*$' | sort -V | paste -sd, -
}

missing() {
    for pair in $(echo "$ROCELAB_PORTS" | tr ',' ' '); do
        port=${pair%%=*}
        [ -e "/sys/class/net/$port" ] || printf '%s ' "$port"
    done
}

waited=0
stable=0
last=""
while :; do
    if [ -n "${ROCELAB_PORTS:-}" ]; then
        absent=$(missing)
        if [ -z "$absent" ]; then
            ports=$ROCELAB_PORTS
            break
        fi
    else
        absent="(any ethN)"
        now=$(wired)
        if [ -n "$now" ] && [ "$now" = "$last" ]; then
            stable=$((stable + 1))
            if [ "$stable" -ge "$SETTLE_S" ]; then
                ports=$now
                break
            fi
        else
            stable=0
        fi
        last=$now
    fi
    if [ "$waited" -ge "$WAIT_S" ]; then
        echo "rocelab-switch $NAME: ports still missing after ${WAIT_S} s: $absent" >&2
        exit 1
    fi
    sleep 1
    waited=$((waited + 1))
done

for pair in $(echo "${ROCELAB_MTUS:-}" | tr ',' ' '); do
    ip link set dev "${pair%%=*}" mtu "${pair#*=}"
done

# The switch's kernel must stay silent on its ports (no IPv6 router solicitations, no
# neighbour discovery): the agent speaks for the switch. Needs a privileged container, which
# containerlab's are.
if ! sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1; then
    echo "rocelab-switch $NAME: warning: cannot disable IPv6 (container not privileged?)" >&2
fi

mkdir -p "$CONTROL_DIR"
set --  # the agent's optional arguments: the SKU files the image's hwsku folder holds
[ ! -f "$LANEMAP" ] || set -- --lanemap "$LANEMAP"
[ ! -f "$PG_LOOKUP" ] || set -- "$@" --pg-profile-lookup "$PG_LOOKUP"
echo "rocelab-switch $NAME: ports $ports; agent log in $CONTROL_DIR/agent.log"
exec python -m rocelab.fabric.agent --config "$CONFIG" --name "$NAME" \
    --control "$CONTROL_DIR/agent.sock" --ports "$ports" \
    ${ROCELAB_TIME_SCALE:+--time-scale "$ROCELAB_TIME_SCALE"} \
    ${ROCELAB_ECN_MARKING:+--ecn-marking "$ROCELAB_ECN_MARKING"} \
    "$@" >>"$CONTROL_DIR/agent.log" 2>&1
