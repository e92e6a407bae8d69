"""labs.images: which images a lab needs and how each is obtained, and image.build's command
lines, run against a recording fake instead of docker, mmdebstrap and pip."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from rocelab.labs import images
from rocelab.labs.clabfile import PORTS_ENV
from rocelab.labs.export import MTUS_ENV
from rocelab.labs.project import PROJECT_ROOT
from rocelab.labs.errors import LabError
from tests.fakes import Answer, FakeRun, installed
from tests.platform_configs import SHARED_HEADROOM_LOOKUP

DATA = Path(__file__).resolve().parent.parent / "data" / "containerlab"
VERSION = images.project_version()


def test_project_version_is_the_pyproject_version():
    assert f'version = "{VERSION}"' in (PROJECT_ROOT / "pyproject.toml").read_text()


# ---- how each missing image is obtained -----------------------------------------------------

def test_each_missing_image_says_how_to_obtain_it():
    message = images.missing_message([
        images.NeededImage("rocelab-host:latest", ("h1", "h2"), sonic_vs=False),
        images.NeededImage("docker-sonic-vs:202405", ("leaf1",), sonic_vs=True),
        images.NeededImage("alpine:3.20", ("h9",), sonic_vs=False)])
    assert "\n" not in message
    assert message.split("; ") == [
        "containerlab runtime: image rocelab-host:latest is not built here: invoke image.build",
        "image docker-sonic-vs:202405 (nodes leaf1) is not here: SONiC-VS is on no registry: "
        "download docker-sonic-vs.gz from SONiC's build artefacts (or make "
        "target/docker-sonic-vs.gz in sonic-buildimage), then docker load -i "
        "docker-sonic-vs.gz and docker tag the loaded image as docker-sonic-vs:202405",
        "image alpine:3.20 (nodes h9) is not here: docker pull alpine:3.20"]
    assert "docker pull docker-sonic-vs" not in message
    assert images.image_inspect_argv("x:1") == ["docker", "image", "inspect", "x:1"]


APT = DATA / "apt"
APT_SOURCES = (APT / "sources.list", APT / "sources.list.d")
MIRRORS = images.DebianMirrors("http://mirror.example.org/debian",
                               "http://security.example.org/debian-security")


def test_the_base_image_comes_from_this_machines_debian_mirror():
    sources = images.read_apt_sources(APT_SOURCES)
    # deb lines only (no deb-src), every URI x suite of deb822, the disabled entry and the
    # .disabled file left out, [options] dropped.
    assert [(s.uri, s.suite) for s in sources] == [
        ("http://mirror.example.org/debian", "bookworm"),
        ("http://mirror.example.org/debian", "bookworm-updates"),
        ("http://security.example.org/debian-security", "bookworm-security"),
        ("https://apt.vendor.example/apt", "cloud-sdk-bookworm")]
    assert images.debian_mirrors(sources) == MIRRORS
    assert images.debian_mirrors(sources, "http://other.example/debian/").archive == \
        "http://other.example/debian"
    one_line = images._one_line_sources(
        "deb [signed-by=/k.gpg] http://m.example/debian/ trixie main  # comment\n"
        "deb http://m.example/debian-security trixie-security main\n")
    assert images.debian_mirrors(one_line) == images.DebianMirrors(
        "http://m.example/debian", "http://m.example/debian-security")
    with pytest.raises(LabError, match=r"^image.build: no Debian mirror in this machine's apt "
                                       r"sources .*: pass --mirror"):
        images.debian_mirrors(images.read_apt_sources((APT / "sources.list.d" / "vendor.list",)))


def test_image_command_lines(tmp_path):
    tarball = tmp_path / "rootfs.tar"
    assert images.mmdebstrap_argv(MIRRORS, tarball) == [
        "mmdebstrap", "--variant=minbase",
        "--include=python3,python3-venv,iproute2,ethtool,tcpdump,iperf3,iputils-ping,procps,"
        "ca-certificates",
        "--dpkgopt=path-exclude=/usr/share/man/*", "--dpkgopt=path-exclude=/usr/share/doc/*",
        "--dpkgopt=path-include=/usr/share/doc/*/copyright",
        "--dpkgopt=path-exclude=/usr/share/locale/*",
        "bookworm", str(tarball),
        "deb http://mirror.example.org/debian bookworm main",
        "deb http://mirror.example.org/debian bookworm-updates main",
        "deb http://security.example.org/debian-security bookworm-security main"]
    assert images.DebianMirrors("http://m/debian", None).sources() == [
        "deb http://m/debian bookworm main", "deb http://m/debian bookworm-updates main"]
    assert images.import_argv("docker", tarball, "0.1.0") == [
        "docker", "import",
        "--change", "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "--change", 'CMD ["/bin/bash"]', str(tarball), "rocelab-base:0.1.0"]
    assert images.tag_argv("podman", "rocelab-base", "0.1.0") == [
        "podman", "tag", "rocelab-base:0.1.0", "rocelab-base:latest"]
    assert images.python_target_argv("docker", "0.1.0")[:6] == [
        "docker", "run", "--rm", "--network", "none", "rocelab-base:0.1.0"]
    assert images.project_wheel_argv(tmp_path / "wheels", tmp_path / "source")[1:] == [
        "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(tmp_path / "wheels"),
        str(tmp_path / "source")]
    assert images.build_argv("docker", "rocelab-switch", "0.1.0", tmp_path) == [
        "docker", "build", "-f", str(tmp_path / "Dockerfile"), "--target", "switch",
        "--build-arg", "BASE=rocelab-base:0.1.0",
        "-t", "rocelab-switch:0.1.0", "-t", "rocelab-switch:latest", str(tmp_path)]
    target = images.PythonTarget("3.11", "2.36", "x86_64")
    args = target.pip_args()
    assert args[:8] == ["--only-binary=:all:", "--python-version", "3.11",
                        "--implementation", "cp", "--abi", "cp311", "--platform"]
    platforms = args[8::2]
    assert platforms[0] == "manylinux_2_36_x86_64" and "manylinux_2_5_x86_64" in platforms
    assert {"manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"} <= set(platforms)
    wheel = tmp_path / "wheels" / "rocelab-0.1.0-py3-none-any.whl"
    download = images.dependency_wheels_argv(tmp_path / "wheels", wheel, target)
    assert download[1:5] == ["-m", "pip", "download", "--dest"] and download[-1] == str(wheel)


def image_build_run(python: Answer = (0, "3.11 2.36 x86_64\n", "")) -> FakeRun:
    """docker and pip as image.build meets them: pip wheel leaves the project's wheel."""
    def wheel(argv: list[str]) -> Answer:
        wheels = Path(argv[argv.index("--wheel-dir") + 1])
        wheels.mkdir(parents=True)
        (wheels / "rocelab-0.1.0-py3-none-any.whl").write_bytes(b"")
        return 0, "", ""
    return (FakeRun().on(["docker", "run"], python)
            .on([None, "-m", "pip", "wheel"], wheel))


def test_build_images_builds_the_base_then_both_on_it():
    run, said = image_build_run(), []
    assert images.build_images("docker", run, installed, APT_SOURCES, say=said.append) == [
        f"rocelab-base:{VERSION}", f"rocelab-switch:{VERSION}", f"rocelab-host:{VERSION}"]
    context = Path(run.calls[-1][-1])
    tarball = context / "rootfs.tar"
    target = images.PythonTarget("3.11", "2.36", "x86_64")
    wheel = context / "wheels" / "rocelab-0.1.0-py3-none-any.whl"
    assert run.calls == [["docker", "info"],
                         images.mmdebstrap_argv(MIRRORS, tarball),
                         images.import_argv("docker", tarball, VERSION),
                         images.tag_argv("docker", "rocelab-base", VERSION),
                         images.python_target_argv("docker", VERSION),
                         images.project_wheel_argv(context / "wheels", context / "source"),
                         images.dependency_wheels_argv(context / "wheels", wheel, target),
                         images.build_argv("docker", "rocelab-switch", VERSION, context),
                         images.build_argv("docker", "rocelab-host", VERSION, context)]
    assert all("shell" not in kwargs for kwargs in run.kwargs)
    assert run.kwargs[-1]["cwd"] == context
    assert not context.exists()  # the temporary build context is gone
    assert said[0] == ("rocelab-base: Debian bookworm from http://mirror.example.org/debian "
                       "(mmdebstrap)")


def test_build_without_a_tool_or_daemon_is_one_line():
    run = FakeRun().on(["docker", "info"], (1, "", "Cannot connect to the Docker daemon at "
                                                   "unix:///var/run/docker.sock.\n"))
    with pytest.raises(LabError, match=r"^image.build: no docker daemon answers \('docker "
                                       r"info': Cannot connect.*\); start it and retry$"):
        images.build_images("docker", run, installed, APT_SOURCES)
    assert len(run.calls) == 1
    with pytest.raises(LabError, match=r"'podman' not found \(install it: apt-get install "
                                       r"docker.io, or podman"):
        images.build_images("podman", FakeRun(), {}.get)
    no_mmdebstrap = FakeRun()
    with pytest.raises(LabError, match=r"^image.build: 'mmdebstrap' not found: .*"
                                       r"\(install it: apt-get install mmdebstrap\)$"):
        images.build_images("docker", no_mmdebstrap, lambda name: None if name == "mmdebstrap"
                            else installed(name), APT_SOURCES)
    assert no_mmdebstrap.calls == []
    no_mirror = FakeRun()
    with pytest.raises(LabError, match="no Debian mirror"):
        images.build_images("docker", no_mirror, installed, ())
    assert no_mirror.calls == [["docker", "info"]]


def test_failed_step_names_it():
    run = image_build_run().on(["docker", "build"], (1, "", ""))
    with pytest.raises(LabError, match=r"^image.build: building rocelab-switch failed \(exit 1"):
        images.build_images("docker", run, installed, APT_SOURCES)
    run = FakeRun().on(["mmdebstrap"], (2, "", ""))
    with pytest.raises(LabError, match=r"^image.build: mmdebstrap \(the base root file system\) "
                                       r"failed \(exit 2"):
        images.build_images("docker", run, installed, APT_SOURCES)
    assert run.calls[-1][0] == "mmdebstrap"
    run = image_build_run(python=(125, "", "Unable to find image"))
    with pytest.raises(LabError, match=r"cannot read rocelab-base's python \(Unable to find"):
        images.build_images("docker", run, installed, APT_SOURCES)


def test_dockerfile_builds_every_image_on_the_debian_base():
    """What docker would check at build time, checked here without a daemon: no stage comes
    from a registry, and every COPY source is in the context build_images prepares."""
    text = (PROJECT_ROOT / images.DOCKERFILE).read_text()
    for stage in images.IMAGES.values():
        assert f" AS {stage}\n" in text, stage
    assert "ARG BASE=rocelab-base:latest\n" in text
    stages = set()
    for line in text.splitlines():
        if line.startswith("FROM "):
            words = line.split()
            assert words[1] == "${BASE}" or words[1] in stages, line
            stages.add(words[3])
        if line.startswith("COPY ") and "--from=" not in line:
            assert line.split()[1] in (images.WHEELS, "entrypoint.sh"), line
    assert "pip install --no-cache-dir --no-index --find-links /tmp/wheels rocelab" in text
    assert (PROJECT_ROOT / images.SWITCH_ENTRYPOINT).is_file()
    pyproject = (PROJECT_ROOT / "pyproject.toml").read_text()
    mapping = re.search(r"^package-dir = \{(.*)\}$", pyproject, re.M)
    for folder in re.findall(r'= "(\w+)"', mapping.group(1)):  # the wheel is built from a copy
        assert folder in images.PROJECT_FILES, folder


def test_the_wheel_lists_every_subpackage_of_the_repository():
    """A code folder with an __init__.py that pyproject.toml does not list would be left out
    of the wheel, and its imports would fail only once installed."""
    pyproject = (PROJECT_ROOT / "pyproject.toml").read_text()
    listed = set(re.findall(r'"(rocelab[\w.]*)"', re.search(r"^packages = \[(.*)\]$",
                                                             pyproject, re.M).group(1)))
    folders = {"rocelab"} | {
        "rocelab." + ".".join(init.parent.relative_to(PROJECT_ROOT).parts)
        for top in images.PROJECT_FILES if (PROJECT_ROOT / top).is_dir()
        for init in (PROJECT_ROOT / top).rglob("__init__.py")}
    assert listed == folders


def test_switch_entrypoint_starts_the_agent_on_the_found_ports():
    text = (PROJECT_ROOT / "images/switch/entrypoint.sh").read_text()
    assert text.startswith("#!/bin/sh")
    assert os.access(PROJECT_ROOT / "images/switch/entrypoint.sh", os.X_OK)
    assert ("exec python -m rocelab.fabric.agent --config \"$CONFIG\" --name \"$NAME\" \\\n"
            "    --control \"$CONTROL_DIR/agent.sock\" --ports \"$ports\"") in text
    assert "CONFIG=${ROCELAB_CONFIG:-/etc/sonic/config_db.json}" in text
    assert PORTS_ENV in text and MTUS_ENV in text  # what rocelab sets is what it reads
    if shutil.which("sh"):
        assert subprocess.run(["sh", "-n", str(PROJECT_ROOT / "images/switch/entrypoint.sh")],
                              capture_output=True).returncode == 0




def test_switch_entrypoint_gives_each_port_its_link_mtu(tmp_path):
    """The entrypoint run for real by sh, with ip, sysctl and python replaced by recorders on
    PATH (the ports it waits for: lo, which every machine has)."""
    if shutil.which("sh") is None:
        pytest.skip("no sh on this machine")
    bin_dir, log = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir()
    for tool in ("ip", "sysctl", "python"):
        (bin_dir / tool).write_text(f'#!/bin/sh\necho "{tool} $*" >> "{log}"\n')
        (bin_dir / tool).chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOSTNAME": "leaf1", "ROCELAB_PORTS": "lo",
           "ROCELAB_MTUS": "eth1=9100,eth2=1450", "ROCELAB_CONTROL_DIR": str(tmp_path / "ctl")}
    proc = subprocess.run(["sh", str(PROJECT_ROOT / images.SWITCH_ENTRYPOINT)], env=env,
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    calls = log.read_text().splitlines()
    assert calls[:2] == ["ip link set dev eth1 mtu 9100", "ip link set dev eth2 mtu 1450"]
    assert calls[-1].startswith("python -m rocelab.fabric.agent --config /etc/sonic/config_db.json "
                                "--name leaf1")
    assert "--pg-profile-lookup" not in calls[-1]  # no lookup table bound: none given

    lookup = tmp_path / "pg_profile_lookup.ini"
    lookup.write_text(SHARED_HEADROOM_LOOKUP.text)
    proc = subprocess.run(["sh", str(PROJECT_ROOT / images.SWITCH_ENTRYPOINT)],
                          env={**env, "ROCELAB_PG_LOOKUP": str(lookup)},
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert log.read_text().splitlines()[-1].endswith(f" --pg-profile-lookup {lookup}")
    calls = log.read_text().splitlines()

    (bin_dir / "ip").write_text("#!/bin/sh\necho 'Error: mtu greater than device maximum.' >&2\n"
                                "exit 2\n")
    proc = subprocess.run(["sh", str(PROJECT_ROOT / images.SWITCH_ENTRYPOINT)], env=env,
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and "mtu greater than device maximum" in proc.stderr
    assert not any(c.startswith("python") for c in log.read_text().splitlines()[len(calls):])



def test_switch_entrypoint_waits_for_mapped_wires_and_hands_the_agent_its_lanemap(tmp_path):
    """ROCELAB_PORTS as rocelab sets it (each wire with its PORT entry): the wire is waited
    for by its name and the pairs reach the agent as they are; a lanemap.ini where SONiC-VS
    reads it reaches the agent too, for wires it would map itself."""
    if shutil.which("sh") is None:
        pytest.skip("no sh on this machine")
    bin_dir, log = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir()
    for tool in ("ip", "sysctl", "python"):
        (bin_dir / tool).write_text(f'#!/bin/sh\necho "{tool} $*" >> "{log}"\n')
        (bin_dir / tool).chmod(0o755)
    lanemap = tmp_path / "lanemap.ini"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOSTNAME": "leaf1",
           "ROCELAB_PORTS": "lo=Ethernet8", "ROCELAB_CONTROL_DIR": str(tmp_path / "ctl"),
           "ROCELAB_LANEMAP": str(lanemap)}
    for bound in (False, True):
        if bound:
            lanemap.write_text("eth1:1,2,3,4,5,6,7,8\n")
        proc = subprocess.run(["sh", str(PROJECT_ROOT / images.SWITCH_ENTRYPOINT)], env=env,
                              capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0, proc.stderr
        agent = log.read_text().splitlines()[-1]
        assert "--ports lo=Ethernet8" in agent
        assert agent.endswith(f"--lanemap {lanemap}") == bound, agent