"""Talk to a running switch agent over its control socket (one JSON line each way)."""
from __future__ import annotations

import json
import socket
from pathlib import Path


class AgentError(RuntimeError):
    """The agent is not there, or refused the request."""


class AgentClient:
    def __init__(self, control: str | Path, timeout: float = 2.0) -> None:
        self.control = str(control)
        self.timeout = timeout

    def request(self, cmd: str, **args: object) -> dict:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(self.timeout)
                s.connect(self.control)
                s.sendall(json.dumps({"cmd": cmd, **args}).encode() + b"\n")
                line = s.makefile("rb").readline()
        except (OSError, socket.timeout) as e:
            raise AgentError(f"agent at {self.control}: {e.strerror or e}") from None
        if not line:
            raise AgentError(f"agent at {self.control} closed the connection")
        reply = json.loads(line)
        if not reply.get("ok"):
            raise AgentError(f"agent at {self.control}: {reply.get('error', 'failed')}")
        return reply

    def ping(self) -> dict:
        return self.request("ping")

    def counters(self) -> dict:
        return self.request("counters")["counters"]

    def set_port(self, port: str, up: bool) -> None:
        self.request("port", port=port, up=up)
