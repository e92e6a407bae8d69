"""A switch's per-frame path: ingress classification and admission, bridge or router,
egress queues paced at the port's emulated rate, PFC both ways. ``switch.Switch`` builds
its state from a SONiC configuration and adds its timers and reports; the compiled build
makes this class an extension type, so the state every frame touches is C struct fields.

The pipeline of one frame:

1. ingress (``_ingress``): admin state; MAC-control frames (consumed, never forwarded:
   a PFC or PAUSE pauses this port's egress queues, ``pause``, and counts as
   ``flow_control``; LLDP and the rest are ``mac_control`` drops); the tag;
   classification into ``(tc, pg)`` (``classify``) counted per PG; admission into the
   (port, PG) ingress buffer (``buffers``): a drop there is the frame's disposition
   (``headroom_exhausted``, ``lossy_limit``), and a PG crossing XOFF sends PFC out of this
   port at once (``pause.PfcSender``);
2. decide egress: the VLAN's bridge (``bridge.VlanBridge``) or, for frames to the router
   MAC on a routed port or an SVI, the router (``router.Router``). Both append
   ``(PortState, frame, (tc, pg))`` to a list and return a disposition (``counters``);
3. egress (``_transmit``): the egress port's TC -> queue map picks the queue; WRED/ECN on
   the queue depth marks CE (as the frame leaves the queue, or as it enters with
   ``ecn_marking="enqueue"``) or drops (``egress``); the frame waits in the port's
   ``PortScheduler`` until ``dequeue`` releases it at the port's rate (speed / S), which
   also frees its ingress buffer bytes and may send XON (PFC quanta 0). A frame that
   ``dequeue`` would release at once (nothing queued on the port, wire free, queue not
   paused) cuts through instead: ``receive`` (or ``tick``) returns it, with the same
   effect on pacing, counters and buffers; a port that keeps up never touches a queue.

Control frames the switch sends (PFC) bypass the queues: ``receive``, ``tick`` and
``take_control`` return them for immediate transmission. Frames the switch originates
(ARP, ICMP) take queue 7 like everything else. Tx counters count frames put on the wire,
cut through or dequeued.
"""
from __future__ import annotations

import math

import cython

from .buffers import ADMITTED, PgBuffer
from .bridge import VlanBridge
from .classify import CPU_CLASS, CPU_QUEUE
from .counters import (FLOW_CONTROL, FORWARDED, MAC_CONTROL, MALFORMED, NOT_ROUTER_MAC,
                       PORT_DOWN, PORT_UNCONFIGURED, TO_CPU, VLAN_NOT_MEMBER, PortCounters)
from .egress import EgressPort
from .egress_buffers import QUEUE_LIMIT, QueueBuffer
from . import frames
from .frames import (BROADCAST_MAC, IPV6_MULTICAST_MAC_PREFIX, LINK_LOCAL_PREFIX,
                     MAC_CONTROL_PFC, bytes_at, parse_mac_control, pfc_frame)
from .interfaces import L3Interface
from .pause import PfcSender
from .pools import SharedPool
from . import refresh
from .ports import ROUTED, SWITCHED, PortState
from .scheduler import PortScheduler

# the EtherTypes a frame's own is compared with, C ints when compiled (an imported name is
# a Python object: each comparison boxed the frame's field)
ETH_P_8021Q = cython.declare(cython.int, frames.ETH_P_8021Q)
ETH_P_ARP = cython.declare(cython.int, frames.ETH_P_ARP)
ETH_P_IPV4 = cython.declare(cython.int, frames.ETH_P_IPV4)
ETH_P_IPV6 = cython.declare(cython.int, frames.ETH_P_IPV6)
ETH_P_MAC_CONTROL = cython.declare(cython.int, frames.ETH_P_MAC_CONTROL)


class Charge:
    """The ingress buffer bytes one received frame holds until its last copy leaves: made
    when a copy has to wait in a queue (a frame whose copies all leave at once needs none)."""

    __slots__ = ("buffer", "nbytes", "copies")

    def __init__(self, buffer: PgBuffer, nbytes: int, copies: int) -> None:
        self.buffer = buffer
        self.nbytes = nbytes
        self.copies = copies  # not yet gone



@cython.cfunc
@cython.locals(charge=Charge, nbytes=cython.longlong, copies=cython.longlong)
def _charge(buffer: PgBuffer, nbytes: int, copies: int) -> Charge:
    """A ``Charge``: compiled, allocated and filled in C (a queued frame makes one; the
    call boxed its counts for ``__init__`` to unbox)."""
    if not cython.compiled:
        return Charge(buffer, nbytes, copies)
    charge = Charge.__new__(Charge)
    charge.buffer, charge.nbytes, charge.copies = buffer, nbytes, copies
    return charge


class Forwarding:
    """The per-frame path and the state it runs on, which ``switch.Switch`` sets up."""

    # --- the agent's API -------------------------------------------------------------------

    def receive(self, port: str, frame: bytes, now: float) -> list[tuple[str, bytes]]:
        """One frame arrived on ``port``; returns the frames to transmit now, as (port,
        frame): PFC, and forwarded frames that cut through (unpaced: all of them). The
        others wait in their egress queue for ``dequeue``.

        Every frame gets a disposition on ``port``'s counters (see ``counters``). A port
        missing from the PORT table is the caller's bug: KeyError.
        """
        return self.receive_on(self.port_state(port), frame, now)

    def receive_on(self, state: PortState, frame: bytes, now: float) -> list[tuple[str, bytes]]:
        """``receive`` on the port's own state: the simulator's shells keep each port's,
        where a lookup by name per frame was a dictionary's work at every hop."""
        self._now = now
        self._charged = None
        out: list[tuple[PortState, bytes, tuple]] = []
        disposition = self._ingress(state, frame, now, out)
        if disposition is FORWARDED:
            state.counters.forwarded += 1
        else:
            state.counters.count(disposition)
        charged, self._charged = self._charged, None
        if out or charged is not None:
            self._transmit(out, charged, self._charged_bytes, self._charged_cls, now)
        control, self._control = self._control, []  # take_control, inlined
        return control

    def dequeue(self, port: str, now: float) -> bytes | None:
        """The next frame ``port`` puts on the wire at ``now``, or None while its wire is
        busy or nothing may be sent (see ``next_send_time``). Frees the frame's ingress
        buffer bytes, which may resume a PG: its XON is in ``take_control``."""
        return self.dequeue_on(self._ports[port], now)

    @cython.locals(state=PortState, scheduler=PortScheduler, egress=EgressPort, held=QueueBuffer,
                   counters=PortCounters, charge=Charge, queue=cython.Py_ssize_t)
    def dequeue_on(self, state: PortState, now: float) -> bytes | None:
        """``dequeue`` on the port's own state (``receive_on``)."""
        self._now = now
        port = state.name
        scheduler = state.egress.scheduler
        got = scheduler.dequeue(now)
        if got is None:
            return None
        frame, charge, queue = got
        self._mark_moved(port)
        egress = state.egress
        held = egress.buffers[queue]
        if held is not None:
            self._release_queued(held, len(frame), charge, now)
        if egress.mark_at_dequeue:
            frame = egress.depart(queue, frame)
        if not scheduler.packets:
            self._backlogged.pop(port, None)
        counters = state.counters
        counters.queue_tx_packets[queue] += 1
        counters.queue_tx_bytes[queue] += len(frame)
        if charge is not None:
            self._discharge(charge, now)
        return frame

    def next_send_time(self, port: str) -> float | None:
        """When ``port`` can send its next frame (None: nothing queued, or its TX is
        disabled). A paused queue counts from the end of its pause."""
        at = self.next_send_on(self._ports[port])
        return None if at == math.inf else at

    @cython.locals(state=PortState, egress=EgressPort)
    def next_send_on(self, state: PortState) -> float:
        """``next_send_time`` of the port's own state (``receive_on``) as a C double,
        ``math.inf`` for None: what the simulator asks after every frame."""
        egress = state.egress
        return egress.scheduler.next_send_at() if egress.tx_enabled else math.inf

    def port_state(self, port: str) -> PortState:
        """``port``'s state, for a runtime that keeps it (``receive_on``)."""
        state = self._ports.get(port)
        if state is None:
            raise KeyError(f"{self.hostname}: no port {port!r} in the PORT table")
        return state

    def backlogged(self) -> list[str]:
        """The ports with frames queued (the only ones worth a ``next_send_time``)."""
        return list(self._backlogged)

    @cython.locals(first=PortState, state=PortState)
    def take_touched(self) -> PortState | None:
        """The ports (their states) whose ``next_send_time`` may have moved earlier since the
        last call (a frame queued, a pause or resume received): all an event loop that keeps
        one wake per port must look at again after ``receive``, besides the port it just
        served. Each once, the last touched first, each linking the next by
        ``next_touched`` (None: no more); the caller walks them before its next call into
        the switch. Links in the ports themselves: a set's insertions and pops were 2 % of
        the simulator's event loop, and a list emptied and refilled per frame half that."""
        first = state = self._touched
        self._touched = None
        while state is not None:
            state.touched = False
            state = state.next_touched
        return first

    def _touch(self, port: PortState) -> None:
        """``port``'s send schedule may have moved earlier (``take_touched``)."""
        if not port.touched:
            port.touched = True
            port.next_touched = self._touched
            self._touched = port

    def take_control(self) -> list[tuple[str, bytes]]:
        """Frames to put on the wire now: PFC raised since the last call (XON after
        ``dequeue``) and forwarded frames that cut through (see ``_transmit``)."""
        control, self._control = self._control, []
        return control

    def timers_moved(self) -> bool:
        """Whether ``next_timer`` may be earlier than when it was last asked: a PFC refresh
        started (an XOFF sent), a neighbour's timer moved, a tick ran or a watchdog was
        rescaled. A frame rarely moves any of them, so a shell asks this after each frame
        and ``next_timer`` only when it holds."""
        return (self._refresh_moved or self._timers_moved or self._router.timers_moved
                or self._router6.timers_moved)

    # --- pipeline ----------------------------------------------------------------------------

    def _mark_moved(self, port: str) -> None:
        """``port``'s sampled state may have moved (``sample_moved``), kept once traced."""
        if self._moved is not None:
            self._moved.add(port)

    @cython.locals(port=PortState, frame=bytes, size=cython.Py_ssize_t, counters=PortCounters,
                   buffer=PgBuffer, pg=cython.Py_ssize_t, ethertype=cython.int,
                   off=cython.Py_ssize_t, vid=cython.int, prio=cython.int, tci=cython.int)
    def _ingress(self, port: PortState, frame: bytes, now: float, out: list) -> str:
        """Admission and parsing common to every frame, classification, then the port's
        role decides. A frame is counted in rx once: under its PG once classified, as
        unclassified when the MAC stage turns it away (``PortCounters.rx_packets``)."""
        size = len(frame)
        if not port.up:
            return port.counters.unclassified(PORT_DOWN, size)
        if size < 14:
            return port.counters.unclassified(MALFORMED, size)
        if frame[0] & 1 and frame.startswith(LINK_LOCAL_PREFIX) and frame[5] < 0x10:
            # PFC, PAUSE, LLDP, STP...: link-local, never bridged
            return port.counters.unclassified(self._mac_control_in(port, frame, now), size)
        ethertype = frame[12] << 8 | frame[13]
        if ethertype == ETH_P_8021Q:
            if size < 18:
                return port.counters.unclassified(MALFORMED, size)
            tci = frame[14] << 8 | frame[15]
            ethertype = frame[16] << 8 | frame[17]
            off, vid, prio = 18, tci & 0x0FFF, tci >> 12
        else:
            off, vid, prio = 14, 0, 0
        if ethertype == ETH_P_MAC_CONTROL:  # MAC control to any address (e.g. unicast PAUSE)
            return port.counters.unclassified(self._mac_control_in(port, frame, now), size)
        # classification (classify.PortClassifier.classify, inlined): DSCP for IP when the
        # port has a DSCP map, else the tag's PCP (prio is PCP << 1 | DEI, 0 untagged)
        by_dscp = port.by_dscp
        if by_dscp is None or size < off + 2:
            cls = port.by_prio[prio]
        elif ethertype == ETH_P_IPV4:
            cls = by_dscp[frame[off + 1] >> 2]
        elif ethertype == ETH_P_IPV6:
            cls = by_dscp[(frame[off] & 0x0F) << 2 | frame[off + 1] >> 6]
        else:
            cls = port.by_prio[prio]
        counters = port.counters
        pg = cls[1]
        counters.pg_rx_packets[pg] += 1
        counters.pg_rx_bytes[pg] += size
        buffer = port.pgs[pg]
        admission = buffer.admit(size, now)
        self._mark_moved(port.name)
        if admission is not ADMITTED:  # the usual answer; the others may pause or drop
            if admission.xoff:
                sender = port.pfc[pg]
                self._send_pfc(port, sender.set_xoff(now), sender)
            if not admission.accepted:
                return admission.verdict
        # held by the frame (three fields: a tuple and a boxed size per frame before)
        self._charged, self._charged_bytes, self._charged_cls = buffer, size, cls
        role = port.role
        if role is SWITCHED:
            return self._switched_in(port, frame, ethertype, off, vid, prio, cls, now, out)
        if role is ROUTED:
            if not vid and frame.startswith(self.router_mac):
                # _routed_in's per-packet cases, straight to the router
                if ethertype == ETH_P_IPV4:
                    return self._router.ipv4_in(port.interface, port, frame, off, prio, cls,
                                                out, now)
                if ethertype == ETH_P_IPV6 and port.interface.ips6:
                    return self._router6.ipv6_in(port.interface, port, frame, off, prio, cls,
                                                 out, now)
            return self._routed_in(port, frame, ethertype, off, vid, prio, cls, now, out)
        return PORT_UNCONFIGURED

    @cython.locals(bridge=VlanBridge)
    def _switched_in(self, port: PortState, frame: bytes, ethertype: int, off: int, vid: int,
                     prio: int, cls: tuple, now: float, out: list) -> str:
        """A VLAN member's frame: classify into a VLAN, learn, then route or bridge.

        Untagged and priority-tagged (VID 0) frames belong to the port's untagged VLAN;
        a tagged frame's VID must be one the port is a member of. A frame to the router
        MAC in a VLAN with an SVI is routed; a broadcast ARP is flooded and also seen by
        the SVI (so the switch answers for its gateway address).
        """
        bridge = port.vlans.get(vid) if vid else port.native_vlan
        if bridge is None:
            return VLAN_NOT_MEMBER
        if not frame[6] & 1:
            bridge.learn(bytes_at(frame, 6, 6), port, now)
        svi = bridge.svi
        if svi is not None and frame.startswith(self.router_mac):
            return self._l3_in(svi, port, frame, ethertype, off, prio, cls, out, now)
        if frame[0] & 1:
            disposition = bridge.flood(port, frame, off, prio, cls, out)
            seen = None
            if svi is not None:
                if ethertype == ETH_P_ARP and frame.startswith(BROADCAST_MAC):
                    seen = self._router.arp_in(svi, port, frame, off, prio, out, now)
                elif (ethertype == ETH_P_IPV6 and svi.ips6
                      and frame.startswith(IPV6_MULTICAST_MAC_PREFIX)):
                    seen = self._router6.multicast_in(svi, frame, off, out, now)
            if disposition is not FORWARDED and seen is TO_CPU:
                disposition = TO_CPU
            return disposition
        return bridge.forward(port, bytes_at(frame, 0, 6), frame, off, prio, cls, out, now)

    def _routed_in(self, port: PortState, frame: bytes, ethertype: int, off: int, vid: int,
                   prio: int, cls: tuple, now: float, out: list) -> str:
        """A routed port's frame: only the router MAC (and broadcast ARP) is for us; a
        VLAN tag other than a priority tag has no VLAN to belong to here."""
        if vid:
            return VLAN_NOT_MEMBER
        if frame.startswith(self.router_mac):
            return self._l3_in(port.interface, port, frame, ethertype, off, prio, cls, out,
                               now)
        if ethertype == ETH_P_ARP and frame.startswith(BROADCAST_MAC):
            return self._router.arp_in(port.interface, port, frame, off, prio, out, now)
        if (ethertype == ETH_P_IPV6 and port.interface.ips6
                and frame.startswith(IPV6_MULTICAST_MAC_PREFIX)):
            return self._router6.multicast_in(port.interface, frame, off, out, now)
        return NOT_ROUTER_MAC

    def _l3_in(self, iface: L3Interface, port: PortState, frame: bytes, ethertype: int,
               off: int, prio: int, cls: tuple, out: list, now: float) -> str:
        """A frame to the router MAC: IPv6 to the IPv6 router when the interface has an IPv6
        address, the rest (IPv4, ARP, and what it drops: non-IP such as RoCEv1, IPv6 on an
        IPv4-only interface) to the IPv4 one."""
        if ethertype == ETH_P_IPV6 and iface.ips6:
            return self._router6.ipv6_in(iface, port, frame, off, prio, cls, out, now)
        return self._router.l3_in(iface, port, frame, ethertype, off, prio, cls, out, now)

    def _mac_control_in(self, port: PortState, frame: bytes, now: float) -> str:
        """A PFC or PAUSE frame pauses (or resumes) this port's egress queues, a PFC
        class-enable vector of 0 does nothing (``pause.PauseState``): either is
        ``FLOW_CONTROL``. Any other link-local or MAC-control frame is ``MAC_CONTROL``."""
        off = 18 if frame[12] << 8 | frame[13] == ETH_P_8021Q else 14
        if len(frame) < off or frame[off - 2] << 8 | frame[off - 1] != ETH_P_MAC_CONTROL:
            return MAC_CONTROL
        parsed = parse_mac_control(frame, off)
        if parsed is None:
            return MAC_CONTROL
        opcode, quanta = parsed
        if opcode == MAC_CONTROL_PFC:
            port.egress.pause.on_pfc(quanta, now)
        else:
            port.egress.pause.on_pause(quanta[0], now)
        self._touch(port)
        self._mark_moved(port.name)
        return FLOW_CONTROL

    def _send_pfc(self, port: PortState, quanta: dict[int, int], sender: PfcSender) -> None:
        """Queue a PFC frame out of ``port`` for immediate transmission (control frames
        bypass the queues), counted per priority. A PFC sender that returned quanta moved its
        refresh timer (``next_timer``)."""
        if not quanta:
            return
        refresh.moved(self._refreshes, sender, port.name)
        self._refresh_moved = True
        if not port.up:
            return
        self._control.append((port.name, pfc_frame(self.router_mac, quanta)))
        for priority in quanta:
            port.pfc_tx[priority] += 1

    @cython.locals(port=PortState, egress=EgressPort, held=QueueBuffer, charge=Charge,
                   counters=PortCounters, queue=cython.Py_ssize_t, size=cython.Py_ssize_t,
                   pending=cython.Py_ssize_t)
    def _transmit(self, out: list[tuple[PortState, bytes, tuple]], buffer: PgBuffer | None,
                  nbytes: int, mine: tuple | None, now: float) -> None:
        """The egress stage: every frame the forwarding decided to send passes here, with
        its ingress classification ``(tc, pg)`` (``CPU_CLASS`` for what the switch
        originated). The copies of the received frame (those carrying its class tuple,
        ``mine``) hold its ``nbytes`` of ``buffer`` until the last one leaves; with no copy
        left (held for ARP, consumed, flooded nowhere) the bytes are freed at once. Frames
        released from elsewhere (ARP resolved, originated) hold nothing. A frame to an idle
        port cuts through (``PortScheduler.start_now``), into ``_control``; unpaced, all do.
        Copies are counted in ``pending`` until one has to wait in a queue: only then is
        a ``Charge`` made, which the queued copies share."""
        pending, charge = 0, None
        if buffer is not None:
            if len(out) == 1:  # the usual: one copy (routed, unicast), no loop
                pending = 1 if out[0][2] is mine else 0
            else:
                for entry in out:
                    if entry[2] is mine:
                        pending += 1
            if not pending:
                self._free(buffer, nbytes, now)
        paced = self._paced
        for port, frame, cls in out:
            queue = CPU_QUEUE if cls is CPU_CLASS else port.queue_of[cls[0]]
            egress = port.egress
            admitted = egress.admit(queue, frame)
            if admitted is not None:
                size = len(admitted)
                # cut through when unpaced (nothing ever waits) or when the port is idle
                if paced and not egress.scheduler.start_now(queue, size, now):
                    held = egress.buffers[queue]
                    # egress admission (BUFFER_QUEUE); a ``both`` pool counts a frame once
                    if held is None or held.take(size, cls is mine
                                                 and buffer.pool is held.pool):
                        if cls is mine and charge is None:
                            charge = _charge(buffer, nbytes, pending)
                        egress.scheduler.enqueue(queue, admitted,
                                                 charge if cls is mine else None, now)
                        if egress.scheduler.packets == 1:  # it was not backlogged
                            self._backlogged[port.name] = port
                        self._touch(port)
                        self._mark_moved(port.name)
                        continue
                    egress.count_drop(QUEUE_LIMIT, queue)
                else:
                    if egress.mark_at_dequeue:
                        admitted = egress.depart(queue, admitted)
                    counters = port.counters
                    counters.queue_tx_packets[queue] += 1
                    counters.queue_tx_bytes[queue] += size
                    self._control.append((port.name, admitted))
            if cls is mine:  # this copy left the switch, sent or dropped
                if charge is not None:
                    self._discharge(charge, now)
                else:
                    pending -= 1
                    if not pending:
                        self._free(buffer, nbytes, now)

    @cython.locals(charge=Charge)
    def _discharge(self, charge: Charge, now: float) -> None:
        """One queued copy of a received frame left the switch; the last one frees its
        bytes."""
        charge.copies -= 1
        if not charge.copies:
            self._free(charge.buffer, charge.nbytes, now)

    @cython.locals(buffer=PgBuffer)
    def _free(self, buffer: PgBuffer, nbytes: int, now: float) -> None:
        """A received frame's last copy is gone: its bytes leave its PG, and PGs that fall
        back to XON resume their upstream (PFC quanta 0)."""
        buffer.release(nbytes)
        self._mark_moved(buffer.port)
        if buffer.pool.in_xoff:  # else no PG of the pool to resume: the per-frame case
            self._resume(buffer.pool, now)

    def _resume(self, pool: SharedPool, now: float) -> None:
        """Bytes left ``pool``: its PGs in XOFF that may resume send XON (PFC quanta 0)."""
        for resumed in self._buffers.resume(pool, now):
            self._mark_moved(resumed.port)
            port = self._ports[resumed.port]
            sender = port.pfc[resumed.pg]
            self._send_pfc(port, sender.set_xon(now), sender)

    @cython.locals(held=QueueBuffer, charge=Charge)
    def _release_queued(self, held: QueueBuffer, nbytes: int, charge: Charge | None,
                        now: float) -> None:
        """A queued frame left its queue's egress buffer. In a ``both`` pool the bytes it gives
        back raise the PGs' thresholds too: those in XOFF may resume."""
        pool = held.pool
        given = held.release(nbytes, charge is not None and charge.buffer.pool is pool)
        if given and isinstance(pool, SharedPool) and pool.in_xoff:
            self._resume(pool, now)

    def _flush(self, port: PortState, queue: int, now: float, reason: str) -> None:
        """Drop everything ``queue`` of ``port`` holds (watchdog drop action, port down)."""
        dropped = port.egress.scheduler.flush(queue)
        if not dropped:
            return
        self._mark_moved(port.name)
        port.egress.count_drop(reason, queue, len(dropped))
        held = port.egress.buffers[queue]
        for frame, charge in dropped:
            if held is not None:
                self._release_queued(held, len(frame), charge, now)
            if charge is not None:
                self._discharge(charge, now)
        if not port.egress.scheduler.packets:
            self._backlogged.pop(port.name, None)

