"""``exercise.*``: the course's exercises and their self-checks (checks/exercises.py,
docs/exercises.md)."""
from __future__ import annotations

from invoke import Collection, Exit, task

from .common import USER_ERRORS, console, fail


@task(name="check", help={"n": "the exercise's number (docs/exercises.md)",
                          "runtime": "sim (default: virtual time, in this process) or live "
                                     "(the running lab, as the exercise left it)",
                          "answer": "your answer, for an exercise that asks for one"})
def exercise_check(c, n, runtime="sim", answer=""):
    """Self-check of exercise N: runs the check that proves its expected result."""
    from ...checks import exercises
    try:
        code = exercises.check(int(n), runtime, answer, say=console.print)
    except (*USER_ERRORS, exercises.ExerciseError) as e:
        raise fail(e) from None
    if code:
        raise Exit(f"rocelab: exercise {n}: not yet (see the lines above)", code=code)


@task(name="list")
def exercise_list(c):
    """The exercises and the check each runs."""
    from ...checks import exercises
    for ex in exercises.EXERCISES:
        console.print(f"{ex.number:2d}. {ex.title}  [dim]({ex.lab}: {ex.describe()})[/]")


ns = Collection("exercise", exercise_list)
ns.add_task(exercise_check, name="check")
