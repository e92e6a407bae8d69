"""What the control plane changes on a switch, outside the frames it forwards: a port's admin
and link state (oper up only with both), TX enable (sonic-mgmt's ``PKT_TX_ENABLE``), and the
protocol routes FRR (live) or the simulator's BGP installs. ``fabric.model.switch`` forwards
by the state kept here."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from ipaddress import IPv4Network, IPv6Network

from ..config import IPNetwork
from .counters import PORT_DOWN
from .ports import PortState
from .router import Router
from .router6 import Router6
from .routes import LearnedRoute


class SwitchControl:
    """The control half of ``Switch``: the ports, tables and flush are the switch's own."""

    __slots__ = ()  # Switch holds the slots (switch.py)

    hostname: str
    _now: float
    _paced: bool
    _ports: dict[str, PortState]
    _router: Router
    _router6: Router6
    _touched: PortState | None
    _port: Callable[[str, str], PortState]
    _flush: Callable[[PortState, int, float, str], None]

    def set_tx_enabled(self, port: str, enabled: bool, now: float) -> None:
        """SAI's ``PKT_TX_ENABLE``, as sonic-mgmt's QoS tests use it: a port with TX disabled
        keeps its link and receives, but holds every frame for it in its egress queues
        (charged to their buffers) until TX is enabled again at ``now``, from when the
        wire sends them at its rate; nothing cuts through. Needs a paced switch: at an
        infinite rate nothing ever waits."""
        if not self._paced:
            raise ValueError(f"{self.hostname}: disabling TX needs a paced switch "
                             "(a time_scale)")
        egress = self._port(port, "set_tx_enabled").egress
        if enabled == egress.tx_enabled:
            return
        scheduler = egress.scheduler
        if enabled:  # the wire starts at ``now``: it was not idle while disabled
            scheduler.free_at = now
            if scheduler.packets:
                self._touch(self._ports[port])
        else:  # a wire busy for ever: nothing cuts through or is dequeued
            scheduler.free_at = float("inf")
        egress.tx_enabled = enabled

    def set_port_up(self, port: str, up: bool) -> None:
        """Admin state change (``config interface shutdown/startup``); the port is up (oper)
        while admin and link both are (``_set_oper``)."""
        state = self._port(port, "set_port_up")
        state.admin_up = up
        if self._set_oper(state):
            self._rebuild_routes()

    def set_link_up(self, port: str, up: bool) -> None:
        """Link state change: a PORT entry with no cable (a 32-port config wired on 4) or a
        wire cut is down whatever its admin state, as SONiC's oper status is."""
        state = self._port(port, "set_link_up")
        state.link_up = up
        if self._set_oper(state):
            self._rebuild_routes()

    def wired(self, ports: Iterable[str]) -> None:
        """Only ``ports`` have a cable: every other PORT entry's link is down, so no route,
        neighbour or flood goes out of it (both runtimes call this once, when wired); the
        routes are rebuilt once, however many ports went down."""
        cabled = set(ports)
        changed = False
        for name, state in self._ports.items():
            state.link_up = name in cabled
            changed |= self._set_oper(state)
        if changed:
            self._rebuild_routes()

    def _set_oper(self, state: PortState) -> bool:
        """The oper state from admin and link; whether it changed. A down port neither
        receives nor transmits, its FDB entries are flushed and its queues lost; the caller
        rebuilds the routes (withdrawn through it, ECMP shrinking to the remaining next
        hops, its neighbours forgotten)."""
        up = state.admin_up and state.link_up
        if state.up == up:
            return False
        state.up = up
        if not up:
            for bridge in state.vlans.values():
                bridge.flush_port(state)
            for queue in range(8):  # a dead wire sends nothing: the queues are lost
                self._flush(state, queue, self._now, PORT_DOWN)
        return True

    def _rebuild_routes(self) -> None:
        self._router.rebuild(self._now)
        self._router6.rebuild(self._now)

    def update_routes(self, changes: dict[IPNetwork, LearnedRoute | None]) -> None:
        """Install or withdraw (None) protocol routes, IPv4 and IPv6, then rebuild each
        table once: the switch's counterpart of SONiC's ROUTE_TABLE, fed by
        ``fabric.routesync`` (live) or ``labs.sim.bgp`` (virtual time). A next hop through
        an interface the switch does not have is left out."""
        for prefix, route in changes.items():
            router = self._router if prefix.version == 4 else self._router6
            router.learn(route, int(prefix.network_address), prefix.prefixlen)
        if any(prefix.version == 4 for prefix in changes):
            self._router.rebuild(self._now)
        if any(prefix.version == 6 for prefix in changes):
            self._router6.rebuild(self._now)

    def learned_routes(self) -> dict[IPNetwork, LearnedRoute]:
        learned: dict[IPNetwork, LearnedRoute] = {
            IPv4Network((net, plen)): r for (net, plen), r in self._router.learned().items()}
        learned |= {IPv6Network((net, plen)): r
                    for (net, plen), r in self._router6.learned().items()}
        return learned
