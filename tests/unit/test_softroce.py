"""Soft-RoCE detection on faked machines, and perftest reports parsed from samples."""
from __future__ import annotations

from pathlib import Path

import pytest

from rocelab.traffic import softroce
from rocelab.traffic.softroce import SoftRoceError, detect, parse_perftest, perftest_argv

DATA = Path(__file__).resolve().parent.parent / "data" / "perftest"
RELEASE = "6.1.0-18-amd64"
TOOLS = {"rdma", "ib_write_bw", "ib_send_lat"}


def machine(root: Path, rxe: str = "loadable", provider: bool = True) -> Path:
    """A fake root with rdma_rxe as asked and, optionally, the rxe verbs provider."""
    modules = root / "lib/modules" / RELEASE
    modules.mkdir(parents=True)
    (modules / "modules.dep").write_text("kernel/net/bridge/bridge.ko: kernel/net/llc/llc.ko\n")
    (modules / "modules.builtin").write_text("kernel/fs/ext4/ext4.ko\n")
    if rxe == "loaded":
        (root / "sys/module/rdma_rxe").mkdir(parents=True)
    elif rxe == "builtin":
        (modules / "modules.builtin").write_text(
            "kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko\n")
    elif rxe == "loadable":
        (modules / "modules.dep").write_text(
            "kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko.xz: "
            "kernel/drivers/infiniband/core/ib_core.ko.xz\n")
    if provider:
        (root / "etc/libibverbs.d").mkdir(parents=True)
        (root / "etc/libibverbs.d/rxe.driver").write_text("driver rxe\n")
    return root


def which(present: set[str]):
    return lambda name: f"/usr/bin/{name}" if name in present else None


@pytest.mark.parametrize("rxe", ["loaded", "builtin", "loadable"])
def test_everything_present_is_available(tmp_path, rxe):
    found = detect(machine(tmp_path, rxe), which(TOOLS), RELEASE)
    assert found.available and found.kernel == rxe and found.missing == ()
    assert found.reason == f"Soft-RoCE available: rdma_rxe {rxe}, rdma, perftest"


def test_no_rxe_module_names_the_kernel_and_what_still_works(tmp_path):
    found = detect(machine(tmp_path, rxe=""), which(TOOLS), RELEASE)
    assert not found.available and found.kernel == ""
    assert found.reason == (f"Soft-RoCE unavailable: kernel {RELEASE} has no rdma_rxe module; "
                            f"{softroce.STILL_WORKS}")


def test_modinfo_finds_a_module_the_files_do_not_list(tmp_path, monkeypatch):
    calls = []

    class Done:
        returncode = 0

    monkeypatch.setattr(softroce.subprocess, "run", lambda argv, **kw: calls.append(argv) or Done)
    found = detect(machine(tmp_path, rxe=""), which(TOOLS | {"modinfo"}), RELEASE)
    assert found.kernel == "loadable" and found.available
    assert calls == [["/usr/bin/modinfo", "-k", RELEASE, "rdma_rxe"]]


def test_missing_userspace_names_each_debian_package(tmp_path):
    found = detect(machine(tmp_path, provider=False), which({"ib_send_lat"}), RELEASE)
    assert not found.available
    assert found.missing == (
        "no rdma tool (apt-get install iproute2)",
        "no ib_write_bw (apt-get install perftest)",
        "no rxe verbs provider (apt-get install rdma-core ibverbs-providers)")


def test_provider_library_alone_counts(tmp_path):
    root = machine(tmp_path, provider=False)
    lib = root / "usr/lib/x86_64-linux-gnu/libibverbs"
    lib.mkdir(parents=True)
    (lib / "librxe-rdmav34.so").write_text("")
    assert detect(root, which(TOOLS), RELEASE).available


def test_this_machine_says_why_in_one_line():
    found = detect()
    assert found.reason and "\n" not in found.reason
    assert found.reason.startswith("Soft-RoCE available" if found.available
                                   else "Soft-RoCE unavailable: ")


def test_write_bw_report():
    rows = parse_perftest((DATA / "ib_write_bw_client.txt").read_text())
    assert rows == [{"bytes": 65536, "iterations": 1000, "bw_peak_gbps": 1.95,
                     "bw_avg_gbps": 1.94, "msg_rate_mpps": 0.003702}]


def test_write_bw_every_size_and_the_summary_is_the_largest():
    rows = parse_perftest((DATA / "ib_write_bw_all_sizes.txt").read_text())
    assert [r["bytes"] for r in rows] == [2, 4, 1024, 8388608]
    run = softroce.Perftest("write_bw", "h2", "h1", rows)
    assert run.summary["bw_avg_gbps"] == 2.40


def test_send_lat_report():
    [row] = parse_perftest((DATA / "ib_send_lat_client.txt").read_text())
    assert row == {"bytes": 2, "iterations": 1000, "t_min_usec": 10.52, "t_max_usec": 58.31,
                   "t_typical_usec": 11.23, "t_avg_usec": 11.67, "t_stdev_usec": 1.84,
                   "p99_usec": 17.02, "p99_9_usec": 58.31}


def test_report_in_mb_per_second_is_refused_not_misread():
    with pytest.raises(SoftRoceError, match=r"not understood: BW peak\[MB/sec\]"):
        parse_perftest((DATA / "ib_write_bw_mbytes.txt").read_text())


def test_report_without_rows_is_an_error():
    with pytest.raises(SoftRoceError, match="no result rows"):
        parse_perftest(" Couldn't connect to 10.1.1.11:18515\n")


def test_client_and_server_argv():
    server = perftest_argv("write_bw", "rxe_lab_h1", 3, 65536, 1000)
    assert server == ["ib_write_bw", "-d", "rxe_lab_h1", "-x", "3", "-F", "--report_gbits",
                      "-p", "18515", "-n", "1000", "-s", "65536"]
    client = perftest_argv("send_lat", "rxe_lab_h2", 1, None, 500, "10.1.1.11")
    assert client[0] == "ib_send_lat" and client[-2:] == ["-a", "10.1.1.11"]


def test_unknown_test_is_refused():
    with pytest.raises(SoftRoceError, match="unknown perftest 'read_bw'"):
        perftest_argv("read_bw", "rxe0", 1, None, 10)


def test_roce_v2_gid_of_the_hosts_ipv4_address():
    port = "/sys/class/infiniband/rxe_lab_h1/ports/1"
    listing = "\n".join([
        f"{port}/gids/0:fe80:0000:0000:0000:0000:00ff:fe00:0011",
        f"{port}/gids/1:fe80:0000:0000:0000:0000:00ff:fe00:0011",
        f"{port}/gids/2:0000:0000:0000:0000:0000:ffff:0a01:010b",
        f"{port}/gids/3:0000:0000:0000:0000:0000:ffff:0a01:010b",
        f"{port}/gids/4:0000:0000:0000:0000:0000:0000:0000:0000",
        f"{port}/gid_attrs/types/0:IB/RoCE v1",
        f"{port}/gid_attrs/types/1:RoCE v2",
        f"{port}/gid_attrs/types/2:IB/RoCE v1",
        f"{port}/gid_attrs/types/3:RoCE v2"])
    assert softroce.roce_v2_gid_index(listing, "10.1.1.11") == 3
    with pytest.raises(SoftRoceError, match="no RoCE v2 GID for 10.1.1.12"):
        softroce.roce_v2_gid_index(listing, "10.1.1.12")


def test_device_names_are_unique_per_lab_and_host():
    assert softroce.device_name("lab1", "h1") != softroce.device_name("lab2", "h1")
