"""The switch shell in virtual time: the unchanged ``fabric.model.Switch``, driven as the
agent drives it (``fabric/agent.py``), with wires instead of sockets and the engine's clock.

- a frame arrives: ``receive``; what it returns (PFC, frames that cut through) goes on the
  wire now; a port it left backlogged gets a wake at its ``next_send_time``;
- a port's wake: ``dequeue`` while it gives frames, then ``take_control`` (XON), and a new
  wake if the port is still backlogged (one pending wake per port: a generation number makes
  older ones return at once);
- timers: ``tick`` every ``tick_s`` of fabric time x S (PFC refresh, watchdog, ARP).
"""
from __future__ import annotations

from pathlib import Path

from fabric.trace import Trace
from fabric.client import fidelity
from fabric.model.switch import Switch
from labs.sim.engine import Engine, to_ps
from labs.sim.wire import Wire

# Fabric time between two timer runs: a PFC refresh is due every half pause (168 us at 100G,
# 42 us at 400G); the live agent's 100 ms tick at S = 3000 is 33 us of fabric time.
TICK_FABRIC_S = 20e-6


class SimSwitch:
    def __init__(self, engine: Engine, name: str, switch: Switch, ifaces: dict[str, str],
                 time_scale: float) -> None:
        self.engine = engine
        self.name = name
        self.switch = switch
        self.ifaces = ifaces  # SONiC port -> the clab interface it is wired as
        self.wires: dict[str, Wire] = {}  # SONiC port -> its outgoing wire
        self._armed: dict[str, tuple[int, int]] = {}  # port -> (wake time, generation)
        self._gen = 0
        self.tick_ps = max(1, to_ps(TICK_FABRIC_S * time_scale))
        self.trace: Trace | None = None
        self._trace_gen = 0

    def start(self) -> None:
        self.engine.after(self.tick_ps, self._tick)

    # --- the data path ----------------------------------------------------------------

    def arrive(self, port: str, frame: bytes) -> None:
        switch = self.switch
        self._send(switch.receive(port, frame, self.engine.now))
        self._arm(switch.take_touched())

    def _send(self, out: list[tuple[str, bytes]]) -> None:
        wires = self.wires
        for port, frame in out:
            wire = wires.get(port)
            if wire is not None:  # a port with no cable: the frame leaves into nothing
                wire.send(frame)

    def _arm(self, ports) -> None:
        """A wake for each of ``ports`` that has frames queued, at its next send time,
        unless one is armed at or before it."""
        switch, armed = self.switch, self._armed
        for port in ports:
            at = switch.next_send_time(port)
            if at is None:
                continue
            when = to_ps(at)
            current = armed.get(port)
            if current is not None and current[0] <= when:
                continue
            self._gen += 1
            armed[port] = (when, self._gen)
            self.engine.at(when, self._wake, port, self._gen)

    def _wake(self, port: str, gen: int) -> None:
        if self._armed.get(port, (0, -1))[1] != gen:
            return  # superseded by an earlier wake
        del self._armed[port]
        now = self.engine.now
        wire = self.wires.get(port)
        while (frame := self.switch.dequeue(port, now)) is not None:
            if wire is not None:
                wire.send(frame)
        self._send(self.switch.take_control())
        touched = self.switch.take_touched()
        touched.add(port)
        self._arm(touched)

    def _tick(self) -> None:
        """Timers; a watchdog or a pause expiring may move any port's schedule."""
        switch = self.switch
        self._send(switch.tick(self.engine.now))
        switch.take_touched()
        self._arm(switch.backlogged())
        self.engine.after(self.tick_ps, self._tick)

    def set_port_up(self, port: str, up: bool) -> None:
        self.switch.set_port_up(port, up)
        self.switch.take_touched()
        self._arm(self.switch.backlogged())

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
                           str(path), interval_s, ports, self.engine.now)
        self._trace_gen += 1
        self._sample(self._trace_gen)
        return self.trace.header

    def _sample(self, gen: int) -> None:
        trace = self.trace
        if trace is None or gen != self._trace_gen:
            return
        if trace.poll(self.engine.now):
            self.engine.at(to_ps(trace.next_at), self._sample, gen)

    def trace_stop(self) -> int:
        """Close the trace; the number of samples it wrote."""
        trace, self.trace = self.trace, None
        return trace.close(self.engine.now).samples if trace is not None else 0
