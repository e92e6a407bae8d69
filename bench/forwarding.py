"""Forwarding rate of the switch agent against a bare Python AF_PACKET relay, same run.

Three namespaces: a sender blasting 1 KB frames, the device under test, and a sink whose
kernel counts what arrived (no userspace receiver competing for the two cores). The same
sender and sink measure the bare relay (recv on one veth, send on the other, no parsing), the
agent bridging in a VLAN, and the agent routing (TTL, checksum, MAC rewrite), in rounds.
"""
from __future__ import annotations

import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pyroute2 import NetNS, netns

from rocelab.labs.project import PROJECT_ROOT
from rocelab.labs.runtimes.netns import (await_agent, in_namespace, remove_namespace,
                                         stop_processes)
from rocelab.labs.state import AgentState

PREFIX = "rlbench-"
SRC, DUT, SINK = (PREFIX + n for n in ("src", "dut", "sink"))
FRAME_BYTES = 1024
WARMUP_S = 0.5
WINDOW_S = 2.0
ROUNDS = 3
SWITCH_MAC = "02:52:4c:be:0c:01"


# (result name, routed, time scale): None runs forwarding only; S=1 runs the whole lossless
# pipeline (classification, ingress admission, WRED/ECN, paced scheduler) at 100G, which a
# Python agent never reaches, so pacing never holds it back and the cost is the pipeline's.
VARIANTS = (("agent_bridged_pps", False, None), ("agent_routed_pps", True, None),
            ("agent_full_pipeline_pps", True, 1))
QOS_SOURCE = PROJECT_ROOT / "topologies/roce-v2-leafspine/configs/leaf1/config_db.json"
QOS_TABLES = ("DSCP_TO_TC_MAP", "DOT1P_TO_TC_MAP", "TC_TO_PRIORITY_GROUP_MAP", "TC_TO_QUEUE_MAP",
              "MAP_PFC_PRIORITY_TO_QUEUE", "PORT_QOS_MAP", "BUFFER_POOL", "BUFFER_PROFILE",
              "BUFFER_PG", "BUFFER_QUEUE", "CABLE_LENGTH", "WRED_PROFILE", "SCHEDULER", "QUEUE",
              "PFC_WD")


def qos_tables(ports: tuple[str, ...]) -> dict:
    """The default lab's lossless profile, limited to the benchmark's ports."""
    source = json.loads(QOS_SOURCE.read_text())
    tables = {}
    for table in QOS_TABLES:
        entries = source.get(table, {})
        if table == "CABLE_LENGTH":
            entries = {k: {p: v for p, v in e.items() if p in ports} for k, e in entries.items()}
        elif table in ("PORT_QOS_MAP", "BUFFER_PG", "BUFFER_QUEUE", "QUEUE", "PFC_WD"):
            entries = {k: e for k, e in entries.items()
                       if k.split("|")[0] in ports or k.split("|")[0] == "GLOBAL"}
        tables[table] = entries
    return tables


def switch_config(routed: bool, qos: bool = False) -> dict:
    ports = {p: {"speed": "100000", "mtu": "9100", "admin_status": "up"}
             for p in ("Ethernet0", "Ethernet4")}
    config = {"DEVICE_METADATA": {"localhost": {"hostname": "dut", "mac": SWITCH_MAC}},
              "PORT": ports}
    if routed:
        config["INTERFACE"] = {"Ethernet0|10.9.1.1/24": {}, "Ethernet4|10.9.2.1/24": {}}
    else:
        config["VLAN"] = {"Vlan10": {"vlanid": "10"}}
        config["VLAN_MEMBER"] = {f"Vlan10|{p}": {"tagging_mode": "untagged"} for p in ports}
    if qos:
        config.update(qos_tables(tuple(ports)))
    return config


def udp_frame(dst_mac: str, src_mac: str) -> bytes:
    """A 1 KB IPv4/UDP frame, 10.9.1.2 -> 10.9.2.2, with valid checksums."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    pkt = Ether(dst=dst_mac, src=src_mac) / IP(src="10.9.1.2", dst="10.9.2.2", ttl=64,
                                               tos=26 << 2 | 2) / \
        UDP(sport=4000, dport=9)
    return bytes(pkt / bytes(FRAME_BYTES - len(pkt)))


def mac_of(ns: str, iface: str) -> str:
    with NetNS(ns) as ipr:
        return ipr.get_links(ifname=iface)[0].get_attr("IFLA_ADDRESS")


def rx_packets(ns: str, iface: str) -> int:
    with NetNS(ns) as ipr:
        return ipr.get_links(ifname=iface)[0].get_attr("IFLA_STATS64")["rx_packets"]


def build() -> None:
    for ns in (SRC, DUT, SINK):
        netns.create(ns)
    with NetNS(SRC) as ipr:
        ipr.link("add", ifname="eth1", kind="veth", peer={"ifname": "eth1", "net_ns_fd": DUT})
    with NetNS(DUT) as ipr:
        ipr.link("add", ifname="eth2", kind="veth", peer={"ifname": "eth1", "net_ns_fd": SINK})
    for ns, ifaces in ((SRC, ["eth1"]), (DUT, ["eth1", "eth2"]), (SINK, ["eth1"])):
        with NetNS(ns) as ipr:
            for iface in ifaces:
                ipr.link("set", index=ipr.link_lookup(ifname=iface)[0], state="up")
    with NetNS(SINK) as ipr:
        ipr.addr("add", index=ipr.link_lookup(ifname="eth1")[0], address="10.9.2.2", prefixlen=24)


def teardown() -> None:
    for ns in (SRC, DUT, SINK):
        if ns in netns.listnetns():
            remove_namespace(ns)


def spawn(ns: str, args: list[str], log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen(in_namespace(ns, [sys.executable, *args]), stdout=out,
                                stderr=subprocess.STDOUT, cwd=PROJECT_ROOT)


def rate(frame: bytes, folder: Path) -> float:
    """Delivered packets per second at the sink while the sender runs flat out."""
    sender = spawn(SRC, ["-m", "bench.forwarding", "send", "eth1", frame.hex(),
                         str(WARMUP_S + WINDOW_S + 0.5)], folder / "sender.log")
    try:
        time.sleep(WARMUP_S)  # a measurement window, not a wait for a condition
        before, t0 = rx_packets(SINK, "eth1"), time.perf_counter()
        time.sleep(WINDOW_S)
        after, t1 = rx_packets(SINK, "eth1"), time.perf_counter()
    finally:
        sender.wait()
    return (after - before) / (t1 - t0)


def relay_rate(folder: Path, src_mac: str, sink_mac: str) -> float:
    relay = spawn(DUT, ["-m", "bench.forwarding", "relay", "eth1", "eth2"], folder / "relay.log")
    try:
        return rate(udp_frame(sink_mac, src_mac), folder)
    finally:
        stop_processes([relay.pid])


def agent_rate(folder: Path, name: str, routed: bool, scale: float | None, src_mac: str,
               sink_mac: str) -> float:
    config = folder / f"{name}.json"
    config.write_text(json.dumps(switch_config(routed, qos=scale is not None)))
    control = folder / "dut.sock"
    pacing = [] if scale is None else ["--time-scale", str(scale)]
    log = folder / f"{name}.log"
    agent = spawn(DUT, ["-m", "rocelab.fabric.agent", "--config", str(config), "--name", "dut",
                        "--control", str(control), "--ports", "eth1,eth2", *pacing], log)
    try:
        await_agent(AgentState(node="dut", namespace=DUT, pid=agent.pid, control=str(control),
                               log=str(log)), time.monotonic() + 10)
        return rate(udp_frame(SWITCH_MAC if routed else sink_mac, src_mac), folder)
    finally:
        stop_processes([agent.pid])


def measure() -> dict:
    """ROUNDS rounds of the relay then each variant; rates are medians over the rounds and
    each ratio the median of the rounds' ratios, so that load from other work on the two
    cores, which comes and goes, skews one round rather than the result."""
    samples: dict[str, list[float]] = {"bare_relay_pps": [], **{v[0]: [] for v in VARIANTS}}
    teardown()
    build()
    try:
        with tempfile.TemporaryDirectory(prefix="rocelab-fwd-") as tmp:
            folder = Path(tmp)
            src_mac, sink_mac = mac_of(SRC, "eth1"), mac_of(SINK, "eth1")
            for _ in range(ROUNDS):
                samples["bare_relay_pps"].append(relay_rate(folder, src_mac, sink_mac))
                for name, routed, scale in VARIANTS:
                    samples[name].append(agent_rate(folder, name, routed, scale, src_mac,
                                                    sink_mac))
    finally:
        teardown()
    bare = samples["bare_relay_pps"]
    results: dict = {name: statistics.median(rates) for name, rates in samples.items()}
    results["frame_bytes"] = FRAME_BYTES
    results["rounds"] = samples
    for name, ratio in (("agent_bridged_pps", "bridged_vs_bare"),
                        ("agent_routed_pps", "routed_vs_bare"),
                        ("agent_full_pipeline_pps", "full_pipeline_vs_bare")):
        results[ratio] = statistics.median(a / b for a, b in zip(samples[name], bare))
    return results


def _open(iface: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.bind((iface, 0))
    return s


def _send(iface: str, frame_hex: str, seconds: str) -> None:
    s, frame = _open(iface), bytes.fromhex(frame_hex)
    end = time.monotonic() + float(seconds)
    while time.monotonic() < end:
        for _ in range(256):
            try:
                s.send(frame)
            except OSError:
                pass


def _relay(rx_iface: str, tx_iface: str) -> None:
    rx, tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3)), _open(tx_iface)
    rx.setsockopt(263, 23, 1)  # PACKET_IGNORE_OUTGOING
    rx.bind((rx_iface, 0))
    while True:
        try:
            tx.send(rx.recv(65536))
        except OSError:
            pass


if __name__ == "__main__":
    {"send": _send, "relay": _relay}[sys.argv[1]](*sys.argv[2:])
