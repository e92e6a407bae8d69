"""The agent's control socket: one JSON request line in, one JSON reply line out.

The agent is the switch: nothing said on this socket may stop it or stall its event loop.
So the socket lives in a folder only its owner can enter (0700) and is itself 0600; a peer
that is neither root nor the agent's own user is refused (``SO_PEERCRED``); a request is
at most ``MAX_REQUEST_BYTES`` and must be a JSON object whose command and fields are known and
well typed (``parse_request``), anything else gets an error reply; at most
``MAX_CONNECTIONS`` are open at once, and one that has not finished within
``CONNECTION_TIMEOUT_S`` is closed. All socket I/O is non-blocking and driven by the agent's
selector, so a slow or silent client costs the loop nothing.
"""
from __future__ import annotations

import json
import math
import os
import reprlib
import selectors
import socket
import stat
import struct
import time
import traceback
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

from .model.watchdog import WATCHDOG_PROFILES
from .trace import DEFAULT_MAX_BYTES, DEFAULT_MAX_SECONDS, MAX_PATH, MIN_MAX_BYTES

MAX_REQUEST_BYTES = 64 << 10
MAX_CONNECTIONS = 16
CONNECTION_TIMEOUT_S = 5.0
ACCEPTS_PER_WAKE = 8
RECV_CHUNK = 64 << 10
UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 0.01, 60_000.0
SHORT = reprlib.Repr()
SHORT.maxstring = SHORT.maxother = 40
SHORT.maxlevel = 2


class RequestError(ValueError):
    """A request the agent will not act on; the message is the reply's error."""


class ControlError(RuntimeError):
    """The control socket cannot be set up safely; the agent does not start."""


@dataclass(frozen=True)
class TraceLimits:
    """The agent's ceilings for a trace (``--trace-max-seconds``, ``--trace-max-bytes``),
    also the defaults of a request that names none."""
    max_seconds: float = DEFAULT_MAX_SECONDS
    max_bytes: int = DEFAULT_MAX_BYTES


def _number(name: str, value: object, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or (isinstance(value, float) and not math.isfinite(value)) \
            or not low <= value <= high:  # a huge int compares exactly, never overflows
        raise RequestError(f"{name} must be a number from {low:g} to {high:g}, "
                           f"not {SHORT.repr(value)}")
    return value


def _port(value: object, ports: Collection[str]) -> str:
    if not isinstance(value, str) or value not in ports:
        raise RequestError(f"port must be one of {sorted(ports)}, not {SHORT.repr(value)}")
    return value


def _up(value: object) -> bool:
    if not isinstance(value, bool):
        raise RequestError(f"up must be true or false, not {SHORT.repr(value)}")
    return value


def _profile(value: object) -> str:
    if not isinstance(value, str) or value not in WATCHDOG_PROFILES:
        raise RequestError(f"profile must be one of {', '.join(WATCHDOG_PROFILES)}, "
                           f"not {SHORT.repr(value)}")
    return value


def _path(value: object) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_PATH:
        raise RequestError(f"path must be an absolute file path, not {SHORT.repr(value)}")
    return value


def _ports(value: object, ports: Collection[str]) -> list[str] | None:
    """None means every port; otherwise distinct port names."""
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value) \
            or len(set(value)) != len(value):
        raise RequestError(f"ports must be a list of distinct port names, "
                           f"not {SHORT.repr(value)}")
    unknown = [p for p in value if p not in ports]
    if unknown:
        raise RequestError(f"ports {SHORT.repr(unknown)} are not among {sorted(ports)}")
    return value


def _check(cmd: str, name: str, value: object, ports: Collection[str],
           limits: TraceLimits) -> object:
    """One field of a request, checked: its type, its range, a port the agent has."""
    if cmd == "port":
        return _port(value, ports) if name == "port" else _up(value)
    if name == "profile":
        return _profile(value)
    if name == "kind":
        if value not in WATERMARK_KINDS:
            raise RequestError(f"kind must be one of {', '.join(WATERMARK_KINDS)}, "
                               f"not {SHORT.repr(value)}")
        return value
    if name == "path":
        return _path(value)
    if name == "interval_ms":
        return _number(name, value, MIN_INTERVAL_MS, MAX_INTERVAL_MS)
    if name == "ports":
        return _ports(value, ports)
    if name == "max_seconds":
        return _number(name, value, 0.001, limits.max_seconds)
    if isinstance(value, float):  # max_bytes: a whole number
        raise RequestError(f"max_bytes must be an integer, not {SHORT.repr(value)}")
    return int(_number(name, value, MIN_MAX_BYTES, limits.max_bytes))


WATERMARK_KINDS = ("queue", "pg")
# command -> (required fields, optional fields)
COMMANDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "ping": ((), ()),
    "counters": ((), ()),
    "clear_fidelity": ((), ()),
    "port": (("port", "up"), ()),
    "trace": (("path",), ("interval_ms", "ports", "max_seconds", "max_bytes")),
    "trace_stop": ((), ()),
    "pfc_watchdog": (("profile",), ()),  # the watchdogs' time profile (fabric.model.watchdog)
    "clear_watermarks": (("kind",), ()),  # queue or pg (sonic-clear ... watermark)
}


def _no_constant(name: str) -> float:
    raise RequestError(f"request holds {name}: numbers must be finite")


def parse_request(raw: bytes, ports: Collection[str], limits: TraceLimits) -> dict:
    """``raw`` (one line, without its newline) as a checked request: ``{"cmd": ...}`` plus
    the command's fields, each of the right type and range. Raises RequestError, whose
    message quotes at most a few dozen characters of the input."""
    if len(raw) > MAX_REQUEST_BYTES:
        raise RequestError(f"request longer than {MAX_REQUEST_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RequestError(f"request is not UTF-8 (byte {e.start})") from None
    try:
        request = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise RequestError("request nests too deeply") from None
    except ValueError as e:  # JSONDecodeError, an integer of too many digits
        if isinstance(e, RequestError):
            raise
        raise RequestError(f"request is not JSON: {SHORT.repr(str(e))}") from None
    if not isinstance(request, dict):
        raise RequestError('a request is a JSON object, {"cmd": ..., ...}, '
                           f"not {type(request).__name__}")
    cmd = request.get("cmd")
    if not isinstance(cmd, str) or cmd not in COMMANDS:
        raise RequestError(f"unknown command {SHORT.repr(cmd)} "
                           f"(commands: {', '.join(COMMANDS)})")
    required, optional = COMMANDS[cmd]
    unknown = sorted(set(request) - {"cmd", *required, *optional})
    if unknown:
        raise RequestError(f"{cmd}: unknown field(s) {SHORT.repr(unknown)} (fields: "
                           f"{', '.join((*required, *optional)) or 'none'})")
    missing = [name for name in required if name not in request]
    if missing:
        raise RequestError(f"{cmd}: missing field(s) {', '.join(missing)}")
    return {"cmd": cmd, **{name: _check(cmd, name, value, ports, limits)
                           for name, value in request.items() if name != "cmd"}}


def peer_allowed(uid: int) -> bool:
    """Root, or the user the agent runs as."""
    return uid in (0, os.geteuid())


def secure_folder(folder: Path) -> None:
    """Make ``folder`` (created if absent) the agent's own: a real folder, not a link,
    owned by the agent's user and closed to everyone else (0700)."""
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    except OSError as e:
        raise ControlError(f"cannot create the control folder {folder}: {e.strerror}") from None
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        raise ControlError(f"control folder {folder}: not a folder, or a symbolic link "
                           f"({e.strerror})") from None
    try:
        info = os.fstat(fd)
        if info.st_uid != os.geteuid():
            raise ControlError(f"control folder {folder} belongs to uid {info.st_uid}, "
                               f"not to the agent's ({os.geteuid()})")
        if stat.S_IMODE(info.st_mode) != 0o700:
            os.fchmod(fd, 0o700)
    finally:
        os.close(fd)


@dataclass
class Connection:
    """One client: its request as it arrives, then its reply as it leaves."""
    sock: socket.socket
    deadline: float
    inbox: bytearray = field(default_factory=bytearray)
    outbox: memoryview | None = None


class ControlServer:
    """The listening socket and its connections, served from the agent's selector: the
    agent calls ``ready`` for each event whose key data is ``("control", ...)`` and
    ``expire`` now and then. ``stats`` counts what was served and what was turned away."""

    def __init__(self, path: Path, sel: selectors.BaseSelector,
                 handle: Callable[[dict], dict], ports: Collection[str], limits: TraceLimits,
                 log: Callable[[str], None]) -> None:
        secure_folder(path.parent)
        path.unlink(missing_ok=True)
        self.path = path
        self.sel = sel
        self.handle = handle
        self.ports = ports
        self.limits = limits
        self.log = log
        self.conns: dict[socket.socket, Connection] = {}
        self.stats = {"served": 0, "rejected": 0, "refused_peer": 0, "refused_busy": 0,
                      "timed_out": 0, "internal_errors": 0}
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # the socket is born 0600: no moment when others may connect
        try:
            self.listener.bind(str(path))
        finally:
            os.umask(old)
        self.listener.listen(MAX_CONNECTIONS)
        self.listener.setblocking(False)
        sel.register(self.listener, selectors.EVENT_READ, ("control", None))

    def respond(self, raw: bytes) -> dict:
        """The reply to one request line: an error for a malformed request, and for a
        failure inside the agent too (logged): a bad request costs a reply, not the switch."""
        try:
            request = parse_request(raw, self.ports, self.limits)
        except RequestError as e:
            self.stats["rejected"] += 1
            return {"ok": False, "error": str(e)}
        try:
            reply = self.handle(request)
        except Exception as e:  # a bug in a handler must cost one reply, not the switch
            self.stats["internal_errors"] += 1
            self.log(f"internal error serving {request['cmd']}:\n{traceback.format_exc()}")
            return {"ok": False, "error": f"internal error: {type(e).__name__}: {e}"}
        self.stats["served"] += 1
        return reply

    def ready(self, conn: Connection | None, mask: int) -> None:
        if conn is None:
            self._accept()
        elif mask & selectors.EVENT_WRITE:
            self._send(conn)
        else:
            self._receive(conn)

    def _accept(self) -> None:
        for _ in range(ACCEPTS_PER_WAKE):
            try:
                sock, _ = self.listener.accept()
            except BlockingIOError:
                return
            except OSError as e:  # out of descriptors: the client waits in the backlog
                self.log(f"control socket: accept failed: {e.strerror}")
                return
            sock.setblocking(False)
            pid, uid, _gid = UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET,
                                                          socket.SO_PEERCRED, UCRED.size))
            if not peer_allowed(uid):
                self.stats["refused_peer"] += 1
                self.log(f"control socket: refused pid {pid} uid {uid} (only root or uid "
                         f"{os.geteuid()} may connect)")
                self._turn_away(sock, f"permission denied for uid {uid}")
            elif len(self.conns) >= MAX_CONNECTIONS:
                self.stats["refused_busy"] += 1
                self._turn_away(sock, f"busy: {MAX_CONNECTIONS} connections open")
            else:
                conn = Connection(sock, time.monotonic() + CONNECTION_TIMEOUT_S)
                self.conns[sock] = conn
                self.sel.register(sock, selectors.EVENT_READ, ("control", conn))

    @staticmethod
    def _tell(sock: socket.socket, error: str) -> None:
        """Best effort, never blocking: a client that does not read misses the reason."""
        try:
            sock.send(json.dumps({"ok": False, "error": error}).encode() + b"\n")
        except OSError:
            pass

    def _turn_away(self, sock: socket.socket, error: str) -> None:
        self._tell(sock, error)
        sock.close()

    def _receive(self, conn: Connection) -> None:
        try:
            data = conn.sock.recv(RECV_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            self._drop(conn)
            return
        conn.inbox += data
        end = conn.inbox.find(b"\n")
        if end < 0:
            if data and len(conn.inbox) <= MAX_REQUEST_BYTES:
                return  # more to come
            if not conn.inbox:  # connected and left without a word
                self._drop(conn)
                return
            end = len(conn.inbox)  # the peer finished without a newline, or too long
        reply = self.respond(bytes(conn.inbox[:end]))
        self._reply(conn, reply)

    def _reply(self, conn: Connection, reply: dict) -> None:
        conn.inbox.clear()
        try:
            line = json.dumps(reply).encode()
        except (TypeError, ValueError) as e:  # a handler's bug, as in ``respond``
            self.stats["internal_errors"] += 1
            self.log(f"internal error: unserialisable reply: {e}")
            line = json.dumps({"ok": False, "error": f"internal error: {e}"}).encode()
        conn.outbox = memoryview(line + b"\n")
        self.sel.modify(conn.sock, selectors.EVENT_WRITE, ("control", conn))
        self._send(conn)

    def _send(self, conn: Connection) -> None:
        try:
            sent = conn.sock.send(conn.outbox)
        except BlockingIOError:
            return
        except OSError:
            self._drop(conn)
            return
        conn.outbox = conn.outbox[sent:]
        if not conn.outbox:
            self._drop(conn)

    def expire(self, now: float) -> None:
        """Close the connections past their deadline, each told why if it still listens."""
        for conn in [c for c in self.conns.values() if now > c.deadline]:
            self.stats["timed_out"] += 1
            if conn.outbox is None:
                self._tell(conn.sock, f"no complete request within {CONNECTION_TIMEOUT_S:g} s")
            self._drop(conn)

    def _drop(self, conn: Connection) -> None:
        if self.conns.pop(conn.sock, None) is not None:
            self.sel.unregister(conn.sock)
        conn.sock.close()

    def close(self) -> None:
        for conn in list(self.conns.values()):
            self._drop(conn)
        self.sel.unregister(self.listener)
        self.listener.close()
        self.path.unlink(missing_ok=True)
