"""How a host NIC obeys the PFC and PAUSE frames its link partner sends: one priority's
pause timer, counted at the link's emulated rate (802.1Qbb: a quantum is 512 bit times).

Pure, like the switch model: the sender feeds in each received MAC Control frame and the
time, and asks until when it must hold its frames of that priority.
"""
from __future__ import annotations

from ..fabric.model.frames import MAC_CONTROL_PAUSE
from ..fabric.model.pause import QUANTUM_BITS
from .roce import mac_control


class PauseTimer:
    """The pause state of one priority on one link, and what it cost."""

    def __init__(self, priority: int, rate_bps: float) -> None:
        self.priority = priority
        self.quantum_s = QUANTUM_BITS / rate_bps
        self.until = 0.0  # paused while now < until
        self.began = 0.0
        self.paused_s = 0.0
        self.received = {"xoff": 0, "xon": 0, "pause": 0}

    def on_frame(self, frame: bytes, now: float) -> bool:
        """Apply ``frame`` if it is PFC or PAUSE (True: it was one, and is consumed)."""
        parsed = mac_control(frame)  # PFC, or PAUSE: a tagged PAUSE too
        if parsed is None:
            return False
        opcode, quanta = parsed
        if opcode == MAC_CONTROL_PAUSE:
            self.received["pause"] += 1
            quanta = {self.priority: quanta[0]}
        if self.priority in quanta:
            q = quanta[self.priority]
            self.received["xoff" if q else "xon"] += 1
            self.settle(now)
            self.began = now
            self.until = max(now + q * self.quantum_s, now)
        return True

    def settle(self, now: float) -> None:
        """Count the time paused up to ``now`` (or to the pause's end, if sooner)."""
        if self.until > self.began:
            upto = min(now, self.until)
            self.paused_s += upto - self.began
            self.began = upto

