"""The N:1 incast with kernel TCP (iperf3): the baseline RoCE results are compared against.

One iperf3 server per sender on the destination host (ports BASE_PORT, BASE_PORT+1, ...),
one client per sender in its own namespace, all at once, each writing ``--json``. What a
flow achieved is what the receiver got (``end.sum_received``); what it cost is the
sender's retransmits (``end.sum_sent.retransmits``). Sent bytes are what the sender wrote
into its socket: what was still buffered or in flight when the test ended is never
received, and on a slowed-down fabric that gap is large, so quote the goodput. A DSCP puts
TCP in the lossless or the lossy class (iperf3 takes it as a TOS byte: DSCP << 2, ECN 0).
"""
from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass

from ..labs.lab import Lab

BASE_PORT = 5201  # iperf3's default port, then one more per sender
LISTEN_TIMEOUT_S = 5.0
END_MARGIN_S = 15.0  # iperf3's own connect and result exchange on a slowed-down fabric
BYTES_TIMEOUT_S = 300.0  # a byte-count run has no duration: give up on it after this
STOP_GRACE_S = 2.0


class TcpBaselineError(RuntimeError):
    pass


@dataclass(frozen=True)
class TcpFlow:
    src: str
    port: int
    seconds: float
    sent_bytes: int
    received_bytes: int
    goodput_bps: float  # at the receiver
    retransmits: int


@dataclass(frozen=True)
class TcpIncast:
    dst: str
    dscp: int | None
    flows: list[TcpFlow]

    @property
    def sent_bytes(self) -> int:
        return sum(f.sent_bytes for f in self.flows)

    @property
    def received_bytes(self) -> int:
        return sum(f.received_bytes for f in self.flows)

    @property
    def goodput_bps(self) -> float:
        return sum(f.goodput_bps for f in self.flows)

    @property
    def retransmits(self) -> int:
        return sum(f.retransmits for f in self.flows)


def dscp_to_tos(dscp: int) -> int:
    if not 0 <= dscp <= 63:
        raise TcpBaselineError(f"DSCP {dscp} is out of range (0-63)")
    return dscp << 2


def server_argv(port: int) -> list[str]:
    """One-off (-1): the server exits after its one test, so none outlives a run."""
    return ["iperf3", "-s", "-1", "-p", str(port)]


def client_argv(dst_ip: str, port: int, seconds: int | None = None,
                nbytes: int | None = None, dscp: int | None = None) -> list[str]:
    """iperf3 takes whole seconds (-t) or a byte count (-n)."""
    if (seconds is None) == (nbytes is None):
        raise TcpBaselineError("give exactly one of seconds or bytes")
    if (seconds is not None and seconds < 1) or (nbytes is not None and nbytes < 1):
        raise TcpBaselineError(f"iperf3 needs at least 1 second or 1 byte, "
                               f"not {seconds if nbytes is None else nbytes}")
    amount = ["-t", str(seconds)] if seconds is not None else ["-n", str(nbytes)]
    tos = [] if dscp is None else ["-S", str(dscp_to_tos(dscp))]
    return ["iperf3", "-c", dst_ip, "-p", str(port), "--json", *amount, *tos]


def parse_client(src: str, port: int, text: str) -> TcpFlow:
    """One flow from an iperf3 client's --json output (iperf3 3.12 layout)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        raise TcpBaselineError(f"iperf3 {src}:{port} printed no JSON: "
                               f"{text.strip()[:120]!r}") from None
    if doc.get("error"):
        raise TcpBaselineError(f"iperf3 {src}:{port}: {doc['error']}")
    try:
        sent, received = doc["end"]["sum_sent"], doc["end"]["sum_received"]
        return TcpFlow(src, port, float(received["seconds"]), int(sent["bytes"]),
                       int(received["bytes"]), float(received["bits_per_second"]),
                       int(sent.get("retransmits", 0)))
    except (KeyError, TypeError, ValueError) as e:
        raise TcpBaselineError(f"iperf3 {src}:{port}: JSON lacks end.sum_sent/sum_received "
                               f"({e})") from None


def listening_ports(lab: Lab, node: str) -> set[int]:
    """TCP ports something listens on in the node, from ``ss``."""
    proc = lab.exec(node, ["ss", "-Hltn"], timeout=5)
    ports = set()
    for line in proc.stdout.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[3].rpartition(":")[2].isdigit():
            ports.add(int(fields[3].rpartition(":")[2]))
    return ports


@contextmanager
def servers(lab: Lab, node: str, argvs: dict[int, list[str]]) -> Iterator[None]:
    """Run one server per port in the node until they all listen; stop them on the way out,
    whatever happened."""
    procs = [lab.node(node).popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True)
             for argv in argvs.values()]
    try:
        deadline = time.monotonic() + LISTEN_TIMEOUT_S
        while not set(argvs) <= listening_ports(lab, node):
            for proc, argv in zip(procs, argvs.values()):
                if proc.poll() is not None:
                    err = proc.stderr.read().strip().splitlines() if proc.stderr else []
                    raise TcpBaselineError(f"{' '.join(argv)} on {node} exited "
                                           f"{proc.returncode}" + (f": {err[-1]}" if err else ""))
            if time.monotonic() > deadline:
                raise TcpBaselineError(f"servers on {node} did not listen on ports "
                                       f"{sorted(argvs)} within {LISTEN_TIMEOUT_S:g} s")
            time.sleep(0.05)
        yield
    finally:
        stop(procs)


def stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def incast(lab: Lab, dst: str, srcs: list[str], seconds: int | None = None,
           nbytes: int | None = None, dscp: int | None = None) -> TcpIncast:
    """Every src sends TCP to dst at once, for ``seconds`` or ``nbytes`` each."""
    if not srcs or dst in srcs or len(set(srcs)) != len(srcs):
        raise TcpBaselineError(f"senders {srcs} must be distinct hosts other than {dst}")
    addrs = lab.host_addresses()
    for host in (dst, *srcs):
        if host not in addrs:
            raise TcpBaselineError(f"{host} is not a host with an address in lab {lab.name} "
                                   f"(hosts: {', '.join(addrs)})")
    ports = {src: BASE_PORT + i for i, src in enumerate(srcs)}
    argvs = {src: client_argv(addrs[dst], ports[src], seconds, nbytes, dscp) for src in srcs}
    timeout = BYTES_TIMEOUT_S if seconds is None else seconds + END_MARGIN_S

    def run(src: str) -> TcpFlow:
        try:
            proc = lab.exec(src, argvs[src], timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TcpBaselineError(f"iperf3 {src} -> {dst} did not finish within "
                                   f"{timeout:g} s") from None
        return parse_client(src, ports[src], proc.stdout or proc.stderr)

    with servers(lab, dst, {port: server_argv(port) for port in ports.values()}):
        with ThreadPoolExecutor(max_workers=len(srcs)) as pool:
            flows = list(pool.map(run, srcs))
    return TcpIncast(dst, dscp, flows)
