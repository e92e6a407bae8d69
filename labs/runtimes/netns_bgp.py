"""The control plane of a BGP switch in the netns runtime: its kernel's addresses and FRR.

SONiC runs FRR (zebra + bgpd) beside its ASIC: BGP's TCP sessions terminate in the switch's
Linux kernel, zebra installs the chosen routes in that kernel, and fpmsyncd copies them to
the ASIC. In a switch namespace here the agent is the ASIC, so:

- **the kernel owns the switch's addresses** (``kernel_l3``): INTERFACE addresses on the
  port veths, loopbacks on ``lo``, each SVI on a portless bridge named after its VLAN (a
  stub that gives zebra the connected subnet to announce). Every port veth carries the
  system MAC, the one the agent routes with, so frames the neighbours address to the router
  reach the kernel as well as the agent (AF_PACKET sees a copy; nothing is taken from
  either). The kernel keeps to BGP: ``ip_forward=0`` (transit frames are the agent's: the
  kernel drops its copy silently), no redirects, ``arp_ignore=8`` and
  ``icmp_echo_ignore_all=1`` (the agent answers ARP and ping, as before, so nothing is
  answered twice); the agent counts frames for the switch's addresses it does not answer
  (TCP 179) as ``to_cpu``. The kernel's own frames (BGP, its ARP requests) leave through
  the veth directly, outside the emulated queues: control traffic is not paced.
- **IPv6**, on the interfaces that have an IPv6 address only (the namespace starts with IPv6
  off): ``forwarding=0``, no router advertisements taken or solicited, no duplicate address
  detection (``accept_dad=0``, addresses ``nodad``: a session can start at once),
  ``keep_addr_on_down=1`` (IPv6 would flush the addresses of a port set down, and the
  session would not return with the link), ``net.ipv6.icmp.echo_ignore_all=1`` (the agent
  answers ping). Linux has no ``arp_ignore`` for neighbour discovery: the kernel answers a
  solicitation for its port addresses too, so a neighbour gets two advertisements for one
  solicitation, both with the system MAC. The only difference is the router flag (the agent
  sets it, a non-forwarding kernel does not), which flips in the neighbour's cache; Linux
  acts on that flip only for default routes learned from router advertisements, which no
  node here uses, so the duplicate is harmless and left alone. The kernel resolves its own
  BGP peers with its own solicitations, which the peer's agent (and kernel) answer. Unlike
  IPv4, a non-forwarding IPv6 kernel answers transit it has *no route* for with "no route"
  (ICMPv6 unreachable) where the agent drops silently: a blackhole default in table
  ``QUIET_TABLE``, looked up after the main table, keeps it silent.
- **FRR per switch** (``start``): zebra and bgpd in the namespace, configured from
  ``fabric.frrconfig.render``; the config in the lab's state folder (``<state>/frr/<node>``),
  the daemons' sockets, pid files and logs in ``FRR_RUN_ROOT/<lab>/<node>`` (owned by the
  ``frr`` user, which must be able to reach it: a test's private state folder is not).
- **routes** reach the agent over netlink (``fabric.routesync``).

docs/lab-guide.md (BGP) describes this for users.
"""
from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import time
from pathlib import Path

from ...fabric.config import SwitchConfig
from ...fabric.portmap import PortMap
from ...fabric.frrconfig import render
from ..errors import LabError
from ..state import LabState
from ..topology import Node, Topology

FRR_BIN = Path("/usr/lib/frr")
FRR_USER = "frr"
FRR_RUN_ROOT = Path(os.environ.get("ROCELAB_FRR_RUN", "/run/rocelab-frr"))
DAEMONS = ("zebra", "bgpd")
# An interface with an IPv6 address: IPv6 on, the kernel a quiet host (no forwarding, no
# router advertisements taken, no solicitations sent, no duplicate address detection so the
# address is usable at once) that keeps its addresses when the port goes down and up.
IPV6_SYSCTLS = {"forwarding": "0", "accept_ra": "0", "router_solicitations": "0",
                "accept_dad": "0", "keep_addr_on_down": "1", "disable_ipv6": "0"}
# IPv6 transit the kernel has no route for would be answered with "no route" from the
# kernel (IPv4 drops it silently when not forwarding): a blackhole behind the main table
# drops it silently, and stays out of what zebra and the route sync read (table 254).
QUIET_TABLE = 1000
QUIET_RULE_PREF = 32767
SESSIONS_TIMEOUT_S = 30.0
POLL_S = 0.1
ESTABLISHED = "Established"


class FrrError(LabError):
    """FRR could not be set up or did not converge; the message names the switch."""


def bgp_switches(topo: Topology) -> list[Node]:
    """The switches whose config has BGP sessions: they get a kernel-owned L3 and FRR."""
    return [n for n in topo.switches if n.config is not None and n.config.bgp is not None]


def require_frr() -> None:
    """Say plainly that FRR is missing, before anything is created."""
    missing = [d for d in DAEMONS if not (FRR_BIN / d).is_file()]
    if missing or shutil.which("vtysh") is None:
        raise FrrError("this lab configures BGP (BGP_NEIGHBOR), which runs on FRR: install "
                       "Debian's frr package (scripts/install.sh does)")
    try:
        pwd.getpwnam(FRR_USER)
    except KeyError:
        raise FrrError(f"the '{FRR_USER}' user is missing: reinstall the frr package") from None


def run_dir(lab: str, node: str) -> Path:
    return FRR_RUN_ROOT / lab / node


def config_dir(state: LabState, node: str) -> Path:
    return state.dir / "frr" / node


def _run(argv: list[str], what: str, timeout: float = 15.0) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise FrrError(f"{what}: exit {proc.returncode}" + (f": {detail[-1]}" if detail else ""))
    return proc


def _in(ns: str, argv: list[str]) -> list[str]:
    return ["ip", "netns", "exec", ns, *argv]


def kernel_l3(ns: str, config: SwitchConfig, ports: PortMap) -> None:
    """Give the namespace's kernel the switch's addresses, quietly (see the module doc):
    each wire the addresses of its PORT entry (``ports``)."""
    ifaces = list(ports.ports)
    sysctls = {"net.ipv4.ip_forward": "0", "net.ipv4.icmp_echo_ignore_all": "1",
               "net.ipv4.conf.all.send_redirects": "0",
               "net.ipv4.conf.default.send_redirects": "0",
               "net.ipv4.conf.all.arp_ignore": "8", "net.ipv4.conf.all.arp_announce": "2",
               "net.ipv6.conf.all.forwarding": "0", "net.ipv6.icmp.echo_ignore_all": "1"}
    sysctls |= {f"net.ipv4.conf.{i}.send_redirects": "0" for i in ifaces}
    _sysctl(ns, sysctls)
    links = [f"link set dev {iface} address {config.mac}" for iface in ifaces]
    addresses: dict[str, list] = {iface: list(config.interfaces.get(port, ()))
                                  for iface, port in ports.ports.items()}
    addresses["lo"] = [a for addrs in config.loopbacks.values() for a in addrs]
    for vlan in config.vlans.values():
        if vlan.addresses:
            links += [f"link add {vlan.name} type bridge", f"link set dev {vlan.name} up"]
            addresses[vlan.name] = list(vlan.addresses)
    _ip_batch(ns, links, "links")
    v6 = [name for name, addrs in addresses.items() if any(a.version == 6 for a in addrs)]
    if v6:  # after the MAC change: the link-local address is made from the system MAC
        _sysctl(ns, {f"net.ipv6.conf.{name}.{key}": value for name in v6
                     for key, value in IPV6_SYSCTLS.items()})
    _ip_batch(ns, [f"address add {a} dev {name}" + (" nodad" if a.version == 6 else "")
                   for name, addrs in addresses.items() for a in addrs], "addresses")
    if v6:
        _ip_batch(ns, [f"rule add pref {QUIET_RULE_PREF} table {QUIET_TABLE}",
                       f"route add blackhole default table {QUIET_TABLE}"], "IPv6 rules",
                  ("-6",))


def _sysctl(ns: str, values: dict[str, str]) -> None:
    _run(_in(ns, ["sysctl", "-q", "-w", *(f"{k}={v}" for k, v in values.items())]),
         f"sysctl in {ns}")


def _ip_batch(ns: str, commands: list[str], what: str, options: tuple[str, ...] = ()) -> None:
    if not commands:
        return
    proc = subprocess.run(["ip", *options, "-n", ns, "-batch", "-"], input="\n".join(commands) + "\n",
                          capture_output=True, text=True, timeout=15)
    if proc.returncode != 0:
        raise FrrError(f"{what} in {ns}: {proc.stderr.strip().splitlines()[-1:]}")


def start(lab: str, node: Node, ns: str, state: LabState) -> None:
    """zebra and bgpd in the switch's namespace, then its rendered config applied."""
    conf_dir, rdir = config_dir(state, node.name), run_dir(lab, node.name)
    frr = pwd.getpwnam(FRR_USER)
    rdir.mkdir(parents=True, exist_ok=True)
    for folder in (rdir, *rdir.parents):
        if folder == FRR_RUN_ROOT.parent:
            break
        os.chown(folder, frr.pw_uid, frr.pw_gid)
    conf_dir.mkdir(parents=True, exist_ok=True)
    (conf_dir / "frr.conf").write_text(render(node.config, rdir / "frr.log"))
    (conf_dir / "vtysh.conf").write_text("")
    for daemon in DAEMONS:
        _run(_in(ns, [str(FRR_BIN / daemon), "-d", "-P", "0", "--vty_socket", str(rdir),
                      "-i", str(rdir / f"{daemon}.pid"), "-z", str(rdir / "zserv.api"),
                      "-f", "/dev/null", "--log", f"file:{rdir / daemon}.log"]),
             f"{node.name}: starting {daemon}")
    _run(["vtysh", "--vty_socket", str(rdir), "--config_dir", str(conf_dir), "-b"],
         f"{node.name}: applying {conf_dir / 'frr.conf'}")


def vtysh_json(lab: str, node: str, command: str) -> dict:
    proc = _run(["vtysh", "--vty_socket", str(run_dir(lab, node)), "-c", command],
                f"{node}: vtysh -c {command!r}", timeout=10)
    try:
        return json.loads(proc.stdout or "{}")
    except json.JSONDecodeError:
        raise FrrError(f"{node}: vtysh -c {command!r}: not JSON: {proc.stdout[:200]!r}") from None


def sessions(lab: str, node: str) -> dict[str, dict]:
    """bgpd's sessions of ``node``, IPv4 and IPv6 (each in the address family it is
    activated in): peer address -> state, AS, prefixes received."""
    summary = vtysh_json(lab, node, "show bgp summary json")
    out = {}
    for family in summary.values():
        if not isinstance(family, dict):
            continue
        for addr, p in family.get("peers", {}).items():
            out[addr] = {"state": p.get("state", "?"), "remote_as": p.get("remoteAs"),
                         "description": p.get("desc", ""),
                         "prefixes_received": p.get("pfxRcd", 0),
                         "uptime_ms": p.get("peerUptimeMsec", 0)}
    return out


def await_established(lab: str, nodes: list[Node], timeout_s: float = SESSIONS_TIMEOUT_S) -> float:
    """Wait (bounded) until every configured session that is admin up is Established;
    the seconds it took. The error names each session that is not, and its state."""
    started = time.monotonic()
    deadline = started + timeout_s
    waiting = {(n.name, str(a)): nb for n in nodes for a, nb in n.config.bgp.neighbors.items()
               if nb.admin_up}
    last: dict[tuple[str, str], str] = {}
    while waiting:
        for name in sorted({node for node, _ in waiting}):
            states = sessions(lab, name)
            for key in [k for k in waiting if k[0] == name]:
                last[key] = states.get(key[1], {}).get("state", "not configured")
                if last[key] == ESTABLISHED:
                    del waiting[key]
        if not waiting:
            break
        if time.monotonic() > deadline:
            raise FrrError(f"BGP sessions not Established after {timeout_s:.0f} s: " + "; ".join(
                f"{node} -> {peer} ({nb.name or 'AS ' + str(nb.asn)}): {last.get((node, peer))}"
                for (node, peer), nb in sorted(waiting.items())))
        time.sleep(POLL_S)
    return time.monotonic() - started


def cleanup(lab: str) -> None:
    """The daemons die with their namespace; their run folder goes here."""
    shutil.rmtree(FRR_RUN_ROOT / lab, ignore_errors=True)
