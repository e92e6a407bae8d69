"""Soft-RoCE (the kernel's rdma_rxe) and perftest: real verbs over the emulated fabric, where
the kernel can do it.

Soft-RoCE needs three things: a kernel with rdma_rxe (loaded, built in, or a module to
load), the ``rdma`` tool (iproute2) to add an rxe link on a host's eth1, and userspace
verbs: perftest's binaries and rdma-core's rxe provider. ``detect()`` says which are
missing in one line, and what still works without them, so a task or test can skip with
that line instead of failing.

In the kernel's default (shared) RDMA namespace mode an rxe device is visible from every
namespace, so each host's device is named after its lab and host to stay unique.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..labs.lab import Lab
from .tcp_baseline import servers

TESTS = {"write_bw": "ib_write_bw", "send_lat": "ib_send_lat"}
PROVIDER_GLOBS = ("etc/libibverbs.d/rxe.driver", "usr/lib/*/libibverbs/librxe-rdmav*.so")
STILL_WORKS = "rocelab's userspace RoCEv2 endpoint (nic.endpoint) still works"
PERFTEST_PORT = 18515  # perftest's default TCP port for exchanging QP details
RUN_TIMEOUT_S = 120.0


class SoftRoceError(RuntimeError):
    pass


@dataclass(frozen=True)
class SoftRoce:
    available: bool
    reason: str  # one line: what is missing (and how to get it), or what is there
    kernel: str  # "loaded", "builtin", "loadable" or "" (none)
    missing: tuple[str, ...] = ()


def detect(root: Path = Path("/"), which: Callable[[str], str | None] = shutil.which,
           release: str | None = None) -> SoftRoce:
    """What this machine lacks for Soft-RoCE; ``root`` and ``which`` let tests fake one."""
    release = release or _release()
    kernel = kernel_support(root, release, which)
    missing = []
    if not kernel:
        missing.append(f"kernel {release} has no rdma_rxe module")
    if not which("rdma"):
        missing.append("no rdma tool (apt-get install iproute2)")
    absent = [b for b in TESTS.values() if not which(b)]
    if absent:
        missing.append(f"no {', '.join(absent)} (apt-get install perftest)")
    if not any(any(root.glob(g)) for g in PROVIDER_GLOBS):
        missing.append("no rxe verbs provider (apt-get install rdma-core ibverbs-providers)")
    if missing:
        return SoftRoce(False, f"Soft-RoCE unavailable: {'; '.join(missing)}; {STILL_WORKS}",
                        kernel, tuple(missing))
    return SoftRoce(True, f"Soft-RoCE available: rdma_rxe {kernel}, rdma, perftest", kernel)


def _release() -> str:
    return Path("/proc/sys/kernel/osrelease").read_text().strip()


def kernel_support(root: Path, release: str, which: Callable[[str], str | None]) -> str:
    """How the kernel has rdma_rxe: loaded, built in, loadable, or not at all ("")."""
    if (root / "sys/module/rdma_rxe").is_dir():
        return "loaded"
    modules = root / "lib/modules" / release
    if _lists_rxe(modules / "modules.builtin"):
        return "builtin"
    if _lists_rxe(modules / "modules.dep"):
        return "loadable"
    modinfo = which("modinfo")
    if modinfo and subprocess.run([modinfo, "-k", release, "rdma_rxe"],
                                  capture_output=True).returncode == 0:
        return "loadable"
    return ""


def _lists_rxe(path: Path) -> bool:
    try:
        return "/rdma_rxe.ko" in path.read_text(errors="replace")
    except OSError:
        return False


def require() -> SoftRoce:
    found = detect()
    if not found.available:
        raise SoftRoceError(found.reason)
    return found


def device_name(lab: str, host: str) -> str:
    return f"rxe_{lab}_{host}"


def add_link(lab: Lab, host: str, netdev: str = "eth1") -> str:
    """An rxe device on the host's netdev, created from inside its namespace."""
    dev = device_name(lab.name, host)
    _checked(lab, host, ["rdma", "link", "add", dev, "type", "rxe", "netdev", netdev])
    return dev


def remove_link(lab: Lab, host: str) -> None:
    """Idempotent: a device already gone is what we want."""
    lab.exec(host, ["rdma", "link", "delete", device_name(lab.name, host)], timeout=10)


def _checked(lab: Lab, host: str, argv: list[str],
             timeout: float = 10.0) -> subprocess.CompletedProcess:
    try:
        proc = lab.exec(host, argv, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SoftRoceError(f"{host}: {' '.join(argv)}: no answer within {timeout:g} s") from None
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise SoftRoceError(f"{host}: {' '.join(argv)}: exit {proc.returncode}"
                            + (f": {detail[-1]}" if detail else ""))
    return proc


def roce_v2_gid_index(listing: str, ipv4: str) -> int:
    """The GID index of ``ipv4``'s RoCEv2 entry, from ``grep -rs .`` over the port's gids/
    and gid_attrs/types/ (lines ``.../gids/3:0000:...:ffff:0a01:010b``, ``.../types/3:RoCE v2``)."""
    gids, types = {}, {}
    for line in listing.splitlines():
        path, _, value = line.partition(":")
        folder, _, index = path.rpartition("/")
        if not index.isdigit():
            continue
        (types if folder.endswith("/types") else gids)[int(index)] = value.strip()
    a, b, c, d = (int(x) for x in ipv4.split("."))
    mapped = f"0000:0000:0000:0000:0000:ffff:{a:02x}{b:02x}:{c:02x}{d:02x}"
    for index in sorted(gids):
        if gids[index] == mapped and types.get(index) == "RoCE v2":
            return index
    raise SoftRoceError(f"no RoCE v2 GID for {ipv4} (is the address on the rxe netdev?)")


def gid_index(lab: Lab, host: str, dev: str, ipv4: str) -> int:
    port = f"/sys/class/infiniband/{dev}/ports/1"
    proc = lab.exec(host, ["grep", "-rs", ".", f"{port}/gids", f"{port}/gid_attrs/types"],
                    timeout=10)
    return roce_v2_gid_index(proc.stdout, ipv4)


def perftest_argv(test: str, dev: str, gid: int, size: int | None,
                  iterations: int, server_ip: str | None = None) -> list[str]:
    """Server argv without an address, client argv with one; -a runs every size."""
    if test not in TESTS:
        raise SoftRoceError(f"unknown perftest {test!r} (available: {', '.join(TESTS)})")
    sizes = ["-a"] if size is None else ["-s", str(size)]
    return [TESTS[test], "-d", dev, "-x", str(gid), "-F", "--report_gbits",
            "-p", str(PERFTEST_PORT), "-n", str(iterations), *sizes,
            *([server_ip] if server_ip else [])]


COLUMN_RE = re.compile(r"#\w+|(?:BW |\d+(?:\.\d+)?% )?\w+\[[^\]]*\]")
COLUMNS = {"#bytes": "bytes", "#iterations": "iterations",
           "BW peak[Gb/sec]": "bw_peak_gbps", "BW average[Gb/sec]": "bw_avg_gbps",
           "MsgRate[Mpps]": "msg_rate_mpps",
           "t_min[usec]": "t_min_usec", "t_max[usec]": "t_max_usec",
           "t_typical[usec]": "t_typical_usec", "t_avg[usec]": "t_avg_usec",
           "t_stdev[usec]": "t_stdev_usec", "99% percentile[usec]": "p99_usec",
           "99.9% percentile[usec]": "p99_9_usec"}


def parse_perftest(output: str) -> list[dict[str, float]]:
    """The result rows of a perftest report (one per message size), by column.

    Every column must be one COLUMNS names: a report in other units (MB/sec, without
    --report_gbits) is refused rather than misread.
    """
    rows: list[dict[str, float]] = []
    columns: list[str] | None = None
    for line in output.splitlines():
        if line.strip().startswith("#bytes"):
            names = COLUMN_RE.findall(line)
            unknown = [n for n in names if n not in COLUMNS]
            if unknown:
                raise SoftRoceError(f"perftest columns not understood: {', '.join(unknown)}")
            columns = [COLUMNS[n] for n in names]
        elif columns is not None and line.startswith("-"):
            columns = None  # the table's closing rule
        elif columns is not None:
            values = line.split()
            if len(values) == len(columns) and all(_number(v) for v in values):
                rows.append(dict(zip(columns, map(float, values))))
    if not rows:
        raise SoftRoceError("perftest printed no result rows")
    return rows


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class Perftest:
    test: str
    src: str
    dst: str
    rows: list[dict[str, float]]

    @property
    def summary(self) -> dict[str, float]:
        """The largest message size's row: the one a single figure should quote."""
        return max(self.rows, key=lambda r: r["bytes"])


def run(lab: Lab, src: str, dst: str, test: str = "write_bw", size: int | None = 65536,
        iterations: int = 1000) -> Perftest:
    """perftest from src (client) to dst (server) over rxe links it adds and then removes."""
    require()
    if src == dst:
        raise SoftRoceError(f"perftest needs two hosts, not {src} twice")
    addrs = lab.host_addresses()
    for host in (src, dst):
        if host not in addrs:
            raise SoftRoceError(f"{host} is not a host with an address in lab {lab.name}")
    added: list[str] = []
    try:
        devs = {}
        for host in (dst, src):
            devs[host] = add_link(lab, host)
            added.append(host)
        gids = {h: gid_index(lab, h, devs[h], addrs[h]) for h in (src, dst)}
        server = perftest_argv(test, devs[dst], gids[dst], size, iterations)
        with servers(lab, dst, {PERFTEST_PORT: server}):
            proc = _checked(lab, src, perftest_argv(test, devs[src], gids[src], size,
                                                    iterations, addrs[dst]), RUN_TIMEOUT_S)
        return Perftest(test, src, dst, parse_perftest(proc.stdout))
    finally:
        for host in added:
            remove_link(lab, host)
