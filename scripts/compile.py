"""Build the compiled modules (``compiled.MODULES``) into ``.compiled/`` unless they are
current, or say why not.

Run by scripts/install.sh with the project's .venv python. Cython compiles each module's
unchanged ``.py`` with the ``.pxd`` beside it; the C files and objects are built in a
scratch folder, so the checkout gains only ``.compiled/``. The manifest is written last:
a build that failed half way is never loaded. Exits 0 when there is nothing to compile
with (no Cython or C compiler: rocelab runs pure), 1 when a build that could run failed.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# C libraries a module calls directly (zlib's crc32 for the ICRC and the ECMP hash: Python's
# own zlib underneath)
LIBRARIES = {"rocelab.nic.codec": ["z"], "rocelab.fabric.model.ecmp": ["z"]}


def missing_tools() -> str | None:
    """What the build lacks on this machine, or None."""
    for module in ("Cython", "setuptools"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed in this environment"
    if shutil.which(os.environ.get("CC", "cc")) is None:
        return "no C compiler (cc)"
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").exists():
        return "no Python headers (python3-dev)"
    if not (Path(sysconfig.get_config_var("INCLUDEDIR") or "/usr/include") / "zlib.h").exists():
        return "no zlib headers (zlib1g-dev)"
    return None


def build() -> None:
    from Cython.Build import cythonize
    from setuptools import setup

    from rocelab import compiled
    # what the build is made from, read before it is: a source edited meanwhile makes the
    # build stale, never a current one of older code
    built_from = compiled.fingerprint()
    compiled.MANIFEST.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="rocelab-compile-") as tmp:
        # the package under its own name, so that the modules and their cimports are
        # named rocelab.* whatever the checkout's folder is called
        os.symlink(ROOT, Path(tmp) / "rocelab")
        os.chdir(tmp)
        sources = [str(Path(*m.split(".")).with_suffix(".py")) for m in compiled.MODULES]
        extensions = cythonize(sources, build_dir=str(Path(tmp) / "c"), quiet=True,
                               nthreads=os.cpu_count() or 1,
                               compiler_directives={"language_level": 3,
                                                    "annotation_typing": False,
                                                    "binding": True})
        for extension in extensions:
            if extension.name in LIBRARIES:
                extension.libraries.extend(LIBRARIES[extension.name])
        out = Path(tmp) / "out"
        setup(name="rocelab-compiled", ext_modules=extensions,
              script_args=["-q", "build_ext", "--build-lib", str(out), "--build-temp",
                           str(Path(tmp) / "obj"), "-j", str(os.cpu_count() or 1)])
        shutil.rmtree(compiled.BUILD, ignore_errors=True)  # the old build, gone at the end
        shutil.copytree(out / "rocelab", compiled.BUILD)
    compiled.MANIFEST.write_text(json.dumps({"fingerprint": built_from,
                                             "modules": list(compiled.MODULES)}) + "\n")


def main() -> int:
    from rocelab import compiled
    if compiled.build_state() == "compiled":
        return 0  # current: nothing to do
    lacking = missing_tools()
    if lacking:
        print(f"compile: {lacking}: rocelab runs pure Python (slower, same results)")
        return 0
    try:
        build()
    except (Exception, SystemExit) as e:  # setuptools reports a failed compile as SystemExit
        print(f"compile: the build failed ({e}): rocelab runs pure Python", file=sys.stderr)
        return 1
    print(f"compile: {len(compiled.MODULES)} modules built into .compiled/ ({compiled.state()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
