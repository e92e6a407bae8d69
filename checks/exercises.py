"""The course's exercises (docs/exercises.md) and their self-checks: ``invoke exercise.check N``
runs the checks that prove exercise N's expected result, in virtual time by default (in this
process: nothing to bring up, the same result on every machine) or against the running lab.

The mystery exercise checks the trainee's answer instead: the switch they name must be the
one ``config.lint`` finds an error on in the mystery lab's files (the answer is in no doc).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import lint as lints
from . import run as checks_run
from ..labs import topology
from ..nic.settings import NicSettings


class ExerciseError(ValueError):
    """An exercise number, runtime or answer that cannot be checked (one line)."""


@dataclass(frozen=True)
class Exercise:
    number: int
    title: str
    lab: str  # a lab under topologies/
    k: str = ""  # the checks (pytest -k) that prove it; empty: the answer is checked
    runtimes: tuple[str, ...] = ("sim", "live")

    def describe(self) -> str:
        if not self.k:
            return "self-check: invoke exercise.check N --answer SWITCH"
        return f"checks -k '{self.k}'" + ("" if "sim" in self.runtimes else ", live only")


EXERCISES = (
    Exercise(1, "RoCEv1 cannot leave its VLAN", "roce-v2-leafspine",
             "v1_stays_in_its_l2_domain or v1_to_another_domain"),
    Exercise(2, "RoCEv2 is routed, one TTL per router, spread by UDP source port",
             "roce-v2-leafspine", "v2_is_routed"),
    Exercise(3, "Follow the class: DSCP -> TC -> PG and queue", "roce-v2-leafspine",
             "lands_in_the_configured_pg_and_queue"),
    Exercise(4, "A lossless incast: PFC instead of drops", "roce-v2-leafspine",
             "lossless_incast"),
    Exercise(5, "Take pfc_enable away: the negative control", "roce-v2-leafspine",
             "without_pfc"),
    Exercise(6, "Headroom too small", "roce-v2-leafspine", "headroom_too_small"),
    Exercise(7, "ECN before PFC: DCQCN cuts pause time", "roce-v2-leafspine",
             "ecn_before_pfc or lossy_class"),
    Exercise(8, "Three RoCE modes side by side", "roce-v2-leafspine", "roce_modes"),
    Exercise(9, "A host with the wrong DSCP", "roce-v2-leafspine", "dscp_mismatch"),
    Exercise(10, "A PFC storm and the watchdog", "roce-v2-leafspine", "pfc_storm_watchdog"),
    Exercise(11, "Find the misconfigured switch", "course-mystery"),
    Exercise(12, "Break and heal a deadlock", "pfc-deadlock", "deadlock"),
    Exercise(13, "A victim of PFC", "pfc-victim", "victim_loses_under_pfc"),
)


def exercise(number: int) -> Exercise:
    found = next((e for e in EXERCISES if e.number == number), None)
    if found is None:
        raise ExerciseError(f"no exercise {number} (exercises 1..{len(EXERCISES)}, "
                            "docs/exercises.md)")
    return found


def check(number: int, runtime: str = "sim", answer: str = "",
          say: Callable[[str], None] = print) -> int:
    """Run exercise ``number``'s self-check; 0 when it holds (pytest's exit code, or 1 for
    a wrong answer)."""
    ex = exercise(number)
    if not ex.k:
        return _check_answer(ex, answer, say)
    if runtime not in ("sim", "live"):
        raise ExerciseError(f"--runtime {runtime!r}: sim or live")
    if runtime not in ex.runtimes:
        raise ExerciseError(f"exercise {number} runs only {' or '.join(ex.runtimes)} "
                            f"(invoke exercise.check {number} --runtime {ex.runtimes[0]})")
    say(f"exercise {number}: {ex.title} ({ex.lab}, {runtime})")
    code, folder = checks_run.run(ex.lab, k=ex.k, say=say, reuse=True,
                                  runtime="sim" if runtime == "sim" else "netns")
    say(f"exercise {number}: {'done' if code == 0 else 'not yet'} (evidence in {folder})")
    return code


def culprits(lab: str) -> set[str]:
    """The switches whose config ``config.lint`` reports an error in."""
    hosts = [h.nic for h in topology.load(lab).hosts if h.nic is not None]
    nic = hosts[0] if hosts else NicSettings()
    found = lints.load_lab(lab, nic.roce.priority, nic.roce.dscp, nic.cnp.dscp)
    by_file = {str(n.config_path): n.name for n in found.topology.switches}
    return {by_file.get(f.file, Path(f.file).parent.name)
            for f in lints.lint(found) if f.severity == "error"}


def _check_answer(ex: Exercise, answer: str, say: Callable[[str], None]) -> int:
    if not answer:
        raise ExerciseError(f"exercise {ex.number}: give your answer: invoke exercise.check "
                            f"{ex.number} --answer SWITCH")
    truth = culprits(ex.lab)
    if answer.strip() in truth:
        say(f"exercise {ex.number}: right, {answer} is the misconfigured switch; "
            f"invoke config.lint {ex.lab} shows the table")
        return 0
    say(f"exercise {ex.number}: not {answer}; look again at which switch sends no PFC "
        "and where the drops are (invoke show.pfc-counters, show.interfaces-counters)")
    return 1
