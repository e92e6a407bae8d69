"""``check``: run the checks against a lab, and say in the exit code what the run showed
(``checks.outcome``: 0 passed, 1 failed, 3 inconclusive, 2 usage or input error)."""
from __future__ import annotations

from invoke import Exit, task

from ...checks.sample import DEFAULT_SIZE, DEFAULT_THRESHOLD

from .common import (INCONCLUSIVE, PASSED, REUSE_HELP, USAGE, USER_ERRORS, console,
                     checked_jitter_ns, fail, interrupted)


@task(help={"name": "lab folder, .clab.yml path, or lab name (./topologies/NAME); brought up "
                    "and down again if it is not running",
            "k": "only the checks matching this pytest -k expression",
            "results": "results folder (default: a new ./results/<lab>-<YYYYmmdd-HHMMSS>[-N]/); "
                       "refused when not empty unless --overwrite",
            "overwrite": "replace the previous run's results in --results",
            "reuse": REUSE_HELP,
            "runtime": "netns (default: the live lab), containerlab, or sim (virtual time, "
                       "no root needed; the only one for --suite sonic-mgmt, and its default)",
            "suite": "rocelab (default: the project's checks) or sonic-mgmt (sonic-mgmt's "
                     "QoS SAI, PFC watchdog and snappi cases, thresholds from the config; "
                     "docs/sonic-mgmt.md)",
            "frame_bytes": "sonic-mgmt suite: packet size on the wire, FCS included "
                           "(default 1024)",
            "time_scale": "sim only: S (default 1: real line rate)",
            "seed": "sim only: the seed of every random choice (default 0)",
            "jitter_ns": "sim only: mean timing jitter per frame per hop, fabric ns (default "
                         "0: exact clocks)",
            "probe_all": "forwarding checks probe every pair, however many hosts (for nightly "
                         "runs; docs/checks.md, \"Large fabrics\")",
            "sample_from": "forwarding checks on a fabric of this many hosts or more probe a "
                           f"seeded sample of the pairs (default {DEFAULT_THRESHOLD})",
            "sample_size": "sampled: destinations outside the sender's own L2 domain, per "
                           f"sender (default {DEFAULT_SIZE})"})
def check(c, name, k="", results="", overwrite=False, reuse=False, runtime="",
          time_scale=1.0, seed=0, jitter_ns=0.0, suite="rocelab", frame_bytes=1024,
          probe_all=False, sample_from=DEFAULT_THRESHOLD, sample_size=DEFAULT_SIZE):
    """Run the checks against a lab: [PASS]/[FAIL] per check, junit.xml, summary.json and
    summary.md. Exit 0 all passed, 1 a check failed, 3 inconclusive, 2 usage or input error."""
    from ...checks import outcome
    from ...checks import run as checks
    runtime = runtime or ("sim" if suite == "sonic-mgmt" else "netns")
    if runtime not in ("netns", "containerlab", "sim"):
        raise fail(f"--runtime {runtime!r}: say netns, containerlab or sim")
    extra = ["--time-scale", str(float(time_scale)), "--seed", str(int(seed)),
             "--jitter-ns", str(checked_jitter_ns(jitter_ns))] if runtime == "sim" else []
    if suite == "sonic-mgmt":
        extra += ["--frame-bytes", str(int(frame_bytes))]
    extra += ["--sample-from", str(sample_from), "--sample-size", str(sample_size),
              *(["--probe-all"] if probe_all else [])]
    try:
        code, folder = checks.run(name, k=k or None, results=results or None,
                                  say=console.print, reuse=reuse, overwrite=overwrite,
                                  runtime=runtime, extra=extra, suite=suite)
    except USER_ERRORS as e:
        raise fail(e) from None
    except KeyboardInterrupt as e:
        raise interrupted(e, "the checks stopped after their teardown; every lab the run "
                             "brought up is down (summary.json says incomplete)") from None
    if code == USAGE:
        raise Exit("rocelab: pytest refused the run (a usage error, or no check matched -k); "
                   f"evidence in {folder}", code=USAGE)
    for line in outcome.closing(outcome.summary_of(folder), folder, name):
        console.print(line, highlight=False)
    if code == INCONCLUSIVE:
        summary = outcome.summary_of(folder) or {}
        reasons = [r for c_ in summary.get("checks") or [] if (r := outcome.undecided(c_))]
        first = f" ({reasons[0]})" if reasons else ""
        raise Exit(f"rocelab: checks inconclusive (exit {code}): {len(reasons)} check(s) could "
                   f"not decide{first}; a check that lost fidelity decides with --runtime sim "
                   f"or a larger S; evidence in {folder}", code=code)
    if code != PASSED:
        raise Exit(f"rocelab: checks failed (exit {code}); evidence in {folder}", code=code)
