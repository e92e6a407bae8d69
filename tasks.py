"""invoke tasks for working on rocelab itself: every user task comes from the installed
package (``rocelab.cli.tasks``, also the ``rocelab`` command); only the dev-only ``test`` and
``bench`` live here."""
from __future__ import annotations

import subprocess
import sys

from invoke import Exit, task

from rocelab.cli.tasks import namespace


@task
def test(c, unit=False):
    """The test suite (integration tests need root and are skipped without it)."""
    args = [sys.executable, "-m", "pytest", "tests"] + (["-m", "not root"] if unit else [])
    raise Exit(code=subprocess.call(args))


@task(auto_shortflags=False,  # -h would be --hog, not help
      help={"only": "comma list of lifecycle, forwarding, incast, sim, sim-suite, "
                     "live-verdicts (default: all)",
            "runs": "live-verdicts: back-to-back live check runs (default 10)",
            "racks": "live-verdicts: a generated lab of this many racks (default: the "
                     "default lab)",
            "hog": "live-verdicts: a CPU-bound process holds one core during the runs",
            "hosts": "sim: the side-by-side all-to-all cases, comma list (default 128,512)",
            "htsim": "sim: an htsim_roce binary (bench/htsim/build.sh SRC) to run the same "
                     "cases on, for the ratio"})
def bench(c, only="", runs=10, racks=0, hog=False, hosts="", htsim=""):
    """Benchmarks: lab.up/down against bare iproute2, agent forwarding against a bare relay,
    incast fidelity against S, the simulator's speed and scale, the check suite simulated
    against live, and the share of live check runs that decide every check."""
    names = [name for name in only.split(",") if name]
    extra = [*(["--hosts", hosts] if hosts else []), *(["--htsim", htsim] if htsim else [])]
    raise Exit(code=subprocess.call([sys.executable, "-m", "bench", *names,
                                     "--runs", str(int(runs)), "--racks", str(int(racks)),
                                     *(["--hog"] if hog else []), *extra]))


ns = namespace()
ns.add_task(test)
ns.add_task(bench)
