"""Container images: which ones a containerlab deploy needs and how each is obtained, and the
build of the project's own (``invoke image.build``).

Why a module of its own: the runtime checks every image before it creates anything (a missing
one would otherwise surface as a failed pull deep inside ``containerlab deploy``), and the
answer to "where does this image come from" differs per image: the project's are built here,
SONiC-VS is ``docker load``ed from SONiC's build artefacts (no registry publishes it), anything
else is pulled.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .project import PROJECT_ROOT, version
from .errors import LabError

DOCKER = "docker"
COMMAND_TIMEOUT_S = 60.0
SWITCH_IMAGE = "rocelab-switch"
HOST_IMAGE = "rocelab-host"
DOCKERFILE = "images/Dockerfile"
IMAGES = {SWITCH_IMAGE: "switch", HOST_IMAGE: "host"}  # image -> its stage in DOCKERFILE
LOCAL_IMAGE_PREFIX = "rocelab-"  # built here by image.build, never pulled

# How each kind of image is obtained, said whenever one is missing.
BUILD_HINT = "invoke image.build"
SONIC_VS_HINT = ("SONiC-VS is on no registry: download docker-sonic-vs.gz from SONiC's build "
                 "artefacts (or make target/docker-sonic-vs.gz in sonic-buildimage), then "
                 "docker load -i docker-sonic-vs.gz and docker tag the loaded image as {image}")
PULL_HINT = "docker pull {image}"


class Runner(Protocol):
    """subprocess.run's shape: tests pass a recorder instead."""

    def __call__(self, args: list[str], **kwargs: Any) -> subprocess.CompletedProcess: ...


def project_version() -> str:
    """The switch image's tag: the version of this code (a checkout's pyproject.toml, an
    installed package's metadata), so the agent in the container speaks the control protocol
    of the code that talks to it."""
    found = version()
    if found == "unknown":
        raise LabError("rocelab's version is unknown: neither pyproject.toml nor an "
                       "installed package says it")
    return found


def last_line(text: str) -> str:
    """The line of a tool's output that names its failure."""
    lines = text.strip().splitlines()
    return lines[-1].strip() if lines else ""


# ---- which images a lab needs ---------------------------------------------------------------

@dataclass(frozen=True)
class NeededImage:
    """An image some nodes run, and how it gets onto this machine."""

    image: str
    nodes: tuple[str, ...]
    sonic_vs: bool  # SONiC-VS: docker load, and its start.sh decides how config loads

    def problem(self) -> str:
        """Why this image is missing, and what to run to get it."""
        if self.image.startswith(LOCAL_IMAGE_PREFIX):
            return f"image {self.image} is not built here: {BUILD_HINT}"
        hint = (SONIC_VS_HINT if self.sonic_vs else PULL_HINT).format(image=self.image)
        return f"image {self.image} (nodes {', '.join(self.nodes)}) is not here: {hint}"


def image_inspect_argv(image: str, engine: str = DOCKER) -> list[str]:
    return [engine, "image", "inspect", image]


def missing_message(missing: list[NeededImage]) -> str:
    """One line for every absent image, each with the way to obtain it."""
    return "containerlab runtime: " + "; ".join(need.problem() for need in missing)


# ---- building the project's images ----------------------------------------------------------
#
# Built without an image registry, from Debian packages: mmdebstrap makes a bookworm root file
# system from the apt mirror this machine already uses, the engine imports it as rocelab-base,
# and images/Dockerfile builds both images on it. The project and its Python dependencies go in
# as wheels fetched on this machine (its pip configuration: index, proxy, certificates), so the
# build itself needs no network at all.

BASE_IMAGE = "rocelab-base"
DEBIAN_SUITE = "bookworm"
BASE_PACKAGES = ("python3", "python3-venv", "iproute2", "ethtool", "tcpdump", "iperf3",
                 "iputils-ping", "procps", "ca-certificates")
# Like Debian's -slim images: no manual pages, documentation (but copyrights) or translations.
BASE_DPKG_EXCLUDES = ("path-exclude=/usr/share/man/*", "path-exclude=/usr/share/doc/*",
                      "path-include=/usr/share/doc/*/copyright", "path-exclude=/usr/share/locale/*")
# An imported root file system has no ENV at all; the Dockerfile's ENV PATH extends this one.
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
MMDEBSTRAP = "mmdebstrap"
APT_SOURCES = (Path("/etc/apt/sources.list"), Path("/etc/apt/sources.list.d"))
DEBIAN_SUITES = frozenset({"buster", "bullseye", "bookworm", "trixie", "forky", "duke", "sid",
                           "oldoldstable", "oldstable", "stable", "testing", "unstable"})
SWITCH_ENTRYPOINT = "images/switch/entrypoint.sh"
# What the project's wheel is built from: pyproject.toml's metadata and packages.
PROJECT_FILES = ("pyproject.toml", "README.md", "__init__.py", "compiled.py", "fabric", "nic",
                 "labs", "traffic", "checks", "cli")
WHEELS = "wheels"  # the build context's folder of wheels, see images/Dockerfile
# What the base image's python accepts: the wheels are fetched on this machine for it.
PYTHON_TARGET_PROBE = ("import platform, sys; "
                       "print(f'{sys.version_info[0]}.{sys.version_info[1]}', "
                       "platform.libc_ver()[1], platform.machine())")
BUILD_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class AptSource:
    """One ``deb`` line (or deb822 entry, one per URI and suite) of an apt sources file."""

    uri: str
    suite: str
    components: tuple[str, ...]


@dataclass(frozen=True)
class DebianMirrors:
    archive: str  # e.g. http://deb.debian.org/debian
    security: str | None  # e.g. http://deb.debian.org/debian-security

    def sources(self, suite: str = DEBIAN_SUITE) -> list[str]:
        """One-line sources for the base image: main, its updates and its security updates."""
        lines = [f"deb {self.archive} {suite} main", f"deb {self.archive} {suite}-updates main"]
        if self.security:
            lines.append(f"deb {self.security} {suite}-security main")
        return lines


@dataclass(frozen=True)
class PythonTarget:
    """The base image's python, which the wheels must fit."""

    version: str  # 3.11
    glibc: str  # 2.36
    machine: str  # x86_64

    def pip_args(self) -> list[str]:
        """pip download's target: CPython of that version on every manylinux tag that glibc
        runs (pip does not expand a manylinux tag to the older ones by itself)."""
        abi = "cp" + self.version.replace(".", "")
        major, minor = (int(x) for x in self.glibc.split(".")[:2])
        platforms = [f"manylinux_{major}_{m}_{self.machine}" for m in range(minor, 4, -1)]
        legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
        platforms += [f"{legacy[m]}_{self.machine}" for m in legacy if m <= minor]
        args = ["--only-binary=:all:", "--python-version", self.version,
                "--implementation", "cp", "--abi", abi]
        for platform in platforms:
            args += ["--platform", platform]
        return args


def read_apt_sources(paths: tuple[Path, ...] = APT_SOURCES) -> list[AptSource]:
    """The ``deb`` entries apt reads: sources.list, then sources.list.d's ``*.list`` (one-line
    format) and ``*.sources`` (deb822), in apt's order; other files (``.disabled``, ...) apt
    ignores too."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(p for p in path.iterdir() if p.suffix in (".list", ".sources"))
        elif path.is_file():
            files.append(path)
    found: list[AptSource] = []
    for file in files:
        text = file.read_text(errors="replace")
        found += _deb822_sources(text) if file.suffix == ".sources" else _one_line_sources(text)
    return found


def _one_line_sources(text: str) -> list[AptSource]:
    found = []
    for line in text.splitlines():
        line = re.sub(r"\[[^]]*\]", " ", line.split("#", 1)[0])  # drop [options]
        words = line.split()
        if len(words) >= 3 and words[0] == "deb":
            found.append(AptSource(words[1].rstrip("/"), words[2], tuple(words[3:])))
    return found


def _deb822_sources(text: str) -> list[AptSource]:
    found = []
    for paragraph in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        for line in paragraph.splitlines():
            if line.startswith("#") or line[:1].isspace() or ":" not in line:
                continue  # comments, and continuation lines (an inline Signed-By key)
            key, _, value = line.partition(":")
            fields[key.strip().lower()] = value.strip()
        if "deb" not in fields.get("types", "").split():
            continue
        if fields.get("enabled", "yes").lower() == "no":
            continue
        components = tuple(fields.get("components", "").split())
        found += [AptSource(uri.rstrip("/"), suite, components)
                  for uri in fields.get("uris", "").split()
                  for suite in fields.get("suites", "").split()]
    return found


def debian_mirrors(sources: list[AptSource], mirror: str | None = None) -> DebianMirrors:
    """The Debian archive and security mirrors among ``sources`` (entries for a Debian suite
    with component main); ``mirror`` replaces the archive's."""
    def base_suite(suite: str) -> str:
        return re.sub(r"(-updates|-security|-backports|-proposed-updates|/updates)$", "", suite)

    debian = [s for s in sources if base_suite(s.suite) in DEBIAN_SUITES and "main" in s.components]
    def is_security(suite: str) -> bool:
        return suite.endswith("-security") or suite.endswith("/updates")

    security = next((s.uri for s in debian if is_security(s.suite)), None)
    archive = mirror.rstrip("/") if mirror else next(
        (s.uri for s in debian if not is_security(s.suite)), None)
    if archive is None:
        raise LabError("image.build: no Debian mirror in this machine's apt sources "
                       "(/etc/apt/sources.list, /etc/apt/sources.list.d): pass --mirror "
                       "http://<debian mirror>/debian")
    return DebianMirrors(archive, security)


def mmdebstrap_argv(mirrors: DebianMirrors, tarball: Path, suite: str = DEBIAN_SUITE) -> list[str]:
    """A minimal root file system (essential packages and apt) with what the images need."""
    return [MMDEBSTRAP, "--variant=minbase", "--include=" + ",".join(BASE_PACKAGES),
            *(f"--dpkgopt={opt}" for opt in BASE_DPKG_EXCLUDES),
            suite, str(tarball), *mirrors.sources(suite)]


def import_argv(engine: str, tarball: Path, version: str) -> list[str]:
    return [engine, "import", "--change", f"ENV PATH={BASE_PATH}",
            "--change", 'CMD ["/bin/bash"]', str(tarball), f"{BASE_IMAGE}:{version}"]


def tag_argv(engine: str, image: str, version: str) -> list[str]:
    return [engine, "tag", f"{image}:{version}", f"{image}:latest"]


def python_target_argv(engine: str, version: str) -> list[str]:
    return [engine, "run", "--rm", "--network", "none", f"{BASE_IMAGE}:{version}",
            "python3", "-c", PYTHON_TARGET_PROBE]


def project_wheel_argv(wheels: Path, source: Path) -> list[str]:
    """The project as a wheel (pure Python), built with this machine's pip from ``source``, a
    copy of the checkout's packaged files (setuptools would leave build/ and *.egg-info in the
    checkout, and package stale modules from an old build/)."""
    return [sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(wheels),
            str(source)]


def dependency_wheels_argv(wheels: Path, project_wheel: Path, target: PythonTarget) -> list[str]:
    """The project's dependencies, as wheels for the image's python, with this machine's pip
    configuration (index, find-links, proxy, certificates)."""
    return [sys.executable, "-m", "pip", "download", "--dest", str(wheels), *target.pip_args(),
            str(project_wheel)]


def build_argv(engine: str, image: str, version: str, context: Path) -> list[str]:
    """Tagged with the project version (what the runtime deploys) and ``latest`` (what
    topology files name, e.g. ``rocelab-host:latest``), on the base built with it."""
    return [engine, "build", "-f", str(context / "Dockerfile"), "--target", IMAGES[image],
            "--build-arg", f"BASE={BASE_IMAGE}:{version}",
            "-t", f"{image}:{version}", "-t", f"{image}:latest", str(context)]


def build_images(engine: str = DOCKER, run: Runner = subprocess.run,
                 which: Callable[[str], str | None] = shutil.which,
                 sources: tuple[Path, ...] = APT_SOURCES, mirror: str | None = None,
                 say: Callable[[str], None] = lambda line: None) -> list[str]:
    """Build rocelab-base from Debian packages, then rocelab-switch and rocelab-host on it from
    the checkout. Tools, daemon and mirror are checked first, so anything missing is one clear
    line rather than a build log; the commands' own output goes to the terminal."""
    if which(engine) is None:
        raise LabError(f"image.build: '{engine}' not found (install it: apt-get install "
                       "docker.io, or podman; --engine chooses)")
    if which(MMDEBSTRAP) is None:
        raise LabError(f"image.build: '{MMDEBSTRAP}' not found: it builds the base image from "
                       f"Debian packages (install it: apt-get install {MMDEBSTRAP})")
    probe = run([engine, "info"], capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    if probe.returncode != 0:
        detail = last_line(probe.stderr or probe.stdout) or f"exit {probe.returncode}"
        raise LabError(f"image.build: no {engine} daemon answers ('{engine} info': {detail}); "
                       "start it and retry")
    mirrors = debian_mirrors(read_apt_sources(sources), mirror)
    version = project_version()
    with tempfile.TemporaryDirectory(prefix="rocelab-image-") as tmp:
        context = Path(tmp)
        started = time.monotonic()
        say(f"{BASE_IMAGE}: Debian {DEBIAN_SUITE} from {mirrors.archive} (mmdebstrap)")
        tarball = context / "rootfs.tar"
        _must(run(mmdebstrap_argv(mirrors, tarball)), f"{MMDEBSTRAP} (the base root file system)")
        _must(run(import_argv(engine, tarball, version)), f"importing {BASE_IMAGE}")
        tarball.unlink(missing_ok=True)  # the image has it; free the space now
        _must(run(tag_argv(engine, BASE_IMAGE, version)), f"tagging {BASE_IMAGE}")
        say(f"{BASE_IMAGE}:{version}: {time.monotonic() - started:.0f} s")

        probe = run(python_target_argv(engine, version), capture_output=True, text=True,
                    timeout=COMMAND_TIMEOUT_S)
        words = probe.stdout.split() if probe.returncode == 0 else []
        if len(words) != 3:
            detail = last_line(probe.stderr or probe.stdout) or f"exit {probe.returncode}"
            raise LabError(f"image.build: cannot read {BASE_IMAGE}'s python ({detail})")
        target = PythonTarget(*words)
        wheels = context / WHEELS
        say(f"wheels: the project and its dependencies for python {target.version} "
            f"({target.machine}, glibc {target.glibc}), with this machine's pip")
        source = context / "source"
        for name in PROJECT_FILES:
            if (PROJECT_ROOT / name).is_dir():
                shutil.copytree(PROJECT_ROOT / name, source / name,
                                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                source.mkdir(exist_ok=True)
                shutil.copy2(PROJECT_ROOT / name, source / name)
        _must(run(project_wheel_argv(wheels, source), cwd=context),
              "building the project's wheel")
        project_wheel = next(wheels.glob("rocelab-*.whl"), None)
        if project_wheel is None:
            raise LabError(f"image.build: pip wheel left no rocelab wheel in {wheels}")
        _must(run(dependency_wheels_argv(wheels, project_wheel, target), cwd=context),
              "downloading the dependencies' wheels (pip's index unreachable?)")

        shutil.copy2(PROJECT_ROOT / DOCKERFILE, context / "Dockerfile")
        shutil.copy2(PROJECT_ROOT / SWITCH_ENTRYPOINT, context / "entrypoint.sh")
        built = [f"{BASE_IMAGE}:{version}"]
        for image in IMAGES:
            _must(run(build_argv(engine, image, version, context), cwd=context,
                      timeout=BUILD_TIMEOUT_S), f"building {image}")
            built.append(f"{image}:{version}")
        say(f"all images: {time.monotonic() - started:.0f} s")
    return built


def _must(proc: subprocess.CompletedProcess, what: str) -> None:
    if proc.returncode != 0:
        raise LabError(f"image.build: {what} failed (exit {proc.returncode}; its output is "
                       "above)")
