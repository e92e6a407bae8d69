"""The switch shell in virtual time: the unchanged ``fabric.model.Switch``, driven as the
agent drives it (``fabric/agent.py``), with wires instead of sockets and the engine's clock.

- a frame arrives: ``receive``; what it returns (PFC, frames that cut through) goes on the
  wire now; a port it left backlogged gets a wake at its ``next_send_time``;
- a port's wake (``PortWake``): one ``dequeue``, then ``take_control`` (XON), and a new
  wake if the port is still backlogged (one pending wake per port: a generation number makes
  older ones return at once);
- timers: ``tick`` exactly when ``Switch.next_timer`` says (a PFC refresh at half the pause,
  a watchdog poll, an ARP retry, the FDB sweep), as the agent arms its own: one pending tick
  event, re-armed after a tick, and after a receive that moved a timer
  (``Switch.timers_moved``), when the next timer moved earlier (a generation number makes a
  superseded one return at once).
"""
from __future__ import annotations

import math
from pathlib import Path

import cython

from ...fabric.trace import Trace
from ...fabric.client import fidelity
from ...fabric.model.ports import PortState
from ...fabric.model.switch import Switch
from .engine import Engine, Handler, to_ps
from .link import Wire

# ``Switch.next_send_on`` of a port with nothing queued or its TX disabled (a C double)
NOTHING_TO_SEND = cython.declare(cython.double, math.inf)


class PortWake(Handler):
    """One port of the shell: its state in the model, its outgoing wire, and its pending
    wake: when it comes and its event's sequence number (``Engine.later``; any other event
    of the port's was superseded by an earlier wake and returns at once)."""

    def __init__(self, shell: SimSwitch, state: PortState, wire: Wire | None) -> None:
        self.shell = shell
        self.state = state
        self.wire = wire
        self.armed = False
        self.at = 0  # ps, while armed
        self.seq = -1  # the pending wake's event

    def fire(self, arg: None) -> None:
        if self.armed and self.shell.engine.firing() == self.seq:
            self.armed = False
            self.shell._wake(self)


class PortIn(Handler):
    """A port's inlet, what its incoming wire hands each frame to (``Wire.deliver``): the
    switch's ``arrive`` on that port's state, a C call when compiled."""

    def __init__(self, shell: SimSwitch, port: str) -> None:
        self.shell = shell
        self.state = shell.switch.port_state(port)

    def fire(self, frame: bytes) -> None:
        self.shell.arrive_on(self.state, frame)


class SimSwitch:
    def __init__(self, engine: Engine, name: str, switch: Switch,
                 ifaces: dict[str, str]) -> None:
        self.engine = engine
        self.name = name
        self.switch = switch
        self.ifaces = ifaces  # SONiC port -> the clab interface it is wired as
        self.wires: dict[str, Wire] = {}  # SONiC port -> its outgoing wire
        self._tick_at: int | None = None  # when the pending tick runs (ps); None: none
        self._tick_gen = 0
        self.trace: Trace | None = None
        self._trace_gen = 0
        self._sampling = False  # a sample is scheduled
        self._events = self._sampled_events = 0  # activity, and as of the last sample

    def start(self) -> None:
        self.switch.wired(self.wires)  # a PORT entry with no cable is down
        self._arm_tick()

    # --- the data path ----------------------------------------------------------------

    def arrive(self, port: str, frame: bytes) -> None:
        self.arrive_on(self.switch.port_state(port), frame)

    def arrive_on(self, state: PortState, frame: bytes) -> None:
        """``frame`` arrived on the port whose state is ``state`` (its inlet's)."""
        if self.trace is not None:
            self._activity()
        switch = self.switch
        out = switch.receive_on(state, frame, self.engine.seconds())
        if out:  # most frames wait in a queue: nothing to send, no port touched but theirs
            self._send(out)
        touched = switch.take_touched()
        if touched is not None:
            self._arm_touched(touched)
        if switch.timers_moved():  # an XOFF starts its refresh timer
            self._arm_tick()

    @cython.locals(wire=Wire)
    def _send(self, out: list[tuple[str, bytes]]) -> None:
        wires = self.wires
        for port, frame in out:
            wire = wires[port]
            wire.send(frame)

    @cython.locals(state=PortState)
    def _arm_touched(self, state: PortState | None) -> None:
        """``_arm_one`` each port ``Switch.take_touched`` gave, following their links."""
        while state is not None:
            self._arm_one(self._wake_of(state))
            state = state.next_touched

    def _wake_of(self, state: PortState) -> PortWake:
        """The port's wake, made at its first and kept as the port's ``runtime``: no
        lookup by name per frame."""
        wake = state.runtime
        if wake is None:
            wake = state.runtime = PortWake(self, state, self.wires.get(state.name))
        return wake

    @cython.locals(when=cython.longlong, at=cython.double)
    def _arm_one(self, wake: PortWake) -> None:
        """The port's wake at its next send time, unless it has nothing to send or a wake
        is armed at or before it."""
        at = self.switch.next_send_on(wake.state)
        if at == NOTHING_TO_SEND:
            return
        when = to_ps(at)
        if wake.armed and wake.at <= when:
            return
        wake.armed = True
        wake.at = when
        wake.seq = self.engine.later(max(when, self.engine.now_ps), wake, None)

    def _wake(self, wake: PortWake) -> None:
        """A port's wake (``PortWake``): it may send a frame."""
        if self.trace is not None:
            self._activity()
        # one frame per wake: a paced port's wire is busy until that frame has left, so a
        # second dequeue at the same instant would find it busy; the next wake comes at
        # next_send_time (an unpaced port never queues)
        frame = self.switch.dequeue_on(wake.state, self.engine.seconds())
        if frame is not None:
            wake.wire.send(frame)
        control = self.switch.take_control()
        if control:
            self._send(control)
        touched = self.switch.take_touched()
        if touched is not None:
            self._arm_touched(touched)
        self._arm_one(wake)
        # no _arm_tick: a departure only ends timers (an XON stops a refresh); a tick left
        # armed for one finds nothing to do and re-arms from next_timer

    def _arm_tick(self) -> None:
        """The tick at ``Switch.next_timer`` (at once when it is due already), unless the
        pending one comes at or before it."""
        due = self.switch.next_timer()
        if due is None:
            return
        engine = self.engine
        when = engine.now_ps if due <= engine.seconds() else to_ps(due)
        if self._tick_at is not None and self._tick_at <= when:
            return
        self._tick_gen += 1
        self._tick_at = when
        engine.at(when, self._tick, self._tick_gen)

    def _tick(self, gen: int) -> None:
        """Timers; a watchdog or a pause expiring may move any port's schedule."""
        if gen != self._tick_gen:
            return  # superseded by an earlier tick
        self._tick_at = None
        if self.trace is not None:
            self._activity()
        switch, now = self.switch, self.engine.seconds()
        self._send(switch.tick(now))
        switch.take_touched()
        self._arm_backlogged()
        due = switch.next_timer()
        if due is not None and due <= now:  # would tick at this instant for ever
            raise RuntimeError(f"{self.name}: Switch.next_timer is {due} after a tick at {now}")
        self._arm_tick()

    def set_port_up(self, port: str, up: bool) -> None:
        self.switch.set_port_up(port, up)
        self.switch.take_touched()
        self._arm_backlogged()
        self._arm_tick()

    def _arm_backlogged(self) -> None:
        """``_arm_one`` every port with frames queued (after a tick, or a port going up)."""
        for port in self.switch.backlogged():
            self._arm_one(self._wake_of(self.switch.port_state(port)))

    def set_watchdog_profile(self, profile: str) -> None:
        """The PFC watchdogs' time profile (``fabric.model.watchdog``); they poll at once."""
        self.switch.set_watchdog_profile(profile)
        self._arm_tick()

    # --- what an agent's control socket answers -----------------------------------------

    def counters(self) -> dict:
        counters = self.switch.counters()
        for port, entry in counters["ports"].items():
            entry["iface"] = self.ifaces.get(port, "")
            entry["kernel_rx_drops"] = 0
            entry["tx_errors"] = 0
        counters["virtual_time"] = True
        counters["fidelity"] = fidelity(counters)
        return counters

    def trace_start(self, path: Path, interval_s: float, ports: list[str]) -> dict:
        if self.trace is not None:
            raise ValueError(f"{self.name}: a trace to {self.trace.path} is running")
        path.parent.mkdir(parents=True, exist_ok=True)
        self.trace = Trace(self.switch, self.name, open(path, "wb", buffering=1 << 20),
                           str(path), interval_s, ports, self.engine.now, virtual=True)
        self._trace_gen += 1
        self._sampling = True
        self._sample(self._trace_gen)
        return self.trace.header

    def _sample(self, gen: int) -> None:
        """A trace sample on the interval's grid while the switch is busy. An idle switch
        (no frame, dequeue or timer since the last sample) changes nothing worth a line, so
        sampling pauses until its next event (``_activity``): a storm of seconds with a
        frame every 168 us costs a sample per frame, not one per 0.67 us."""
        trace = self.trace
        if trace is None or gen != self._trace_gen:
            return
        busy = self._events != self._sampled_events
        self._sampled_events = self._events
        if trace.poll(self.engine.now) and busy:
            self.engine.at(to_ps(trace.next_at), self._sample, gen)
        else:
            self._sampling = False

    def _activity(self) -> None:
        """Something happened: a paused trace samples again from its next grid point."""
        self._events += 1
        if self.trace is not None and not self._sampling:
            self._sampling = True
            self.engine.at(max(self.engine.now_ps, to_ps(self.trace.next_at)), self._sample,
                           self._trace_gen)

    def trace_stop(self) -> int:
        """Close the trace; the number of samples it wrote."""
        trace, self.trace = self.trace, None
        return trace.close(self.engine.now).samples if trace is not None else 0
