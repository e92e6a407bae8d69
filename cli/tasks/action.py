"""``action.*``: what an operator does to a running fabric: pull a cable, storm PFC from a
broken NIC, bring up a lab's variant next to it (logic in labs/actions.py)."""
from __future__ import annotations

from pathlib import Path

from invoke import Collection, task

from ...labs import actions
from ...labs import live, topology
from .common import USER_ERRORS, console, fail, using


@task(name="link-down", help={"a": "node or node:iface", "b": "node or node:iface",
                              "lab": "lab name (default: the only running lab)"})
def link_down(c, a, b, lab=""):
    """Take the link between A and B down at both ends, as a pulled cable."""
    _set_link(a, b, lab, False)


@task(name="link-up", help={"a": "node or node:iface", "b": "node or node:iface",
                            "lab": "lab name (default: the only running lab)"})
def link_up(c, a, b, lab=""):
    """Bring the link between A and B back up at both ends."""
    _set_link(a, b, lab, True)


def _set_link(a: str, b: str, lab: str, up: bool) -> None:
    try:
        with using(lab) as handle:
            link = actions.set_link(handle, a, b, up)
    except USER_ERRORS as e:
        raise fail(e) from None
    console.print(f"{link.a} - {link.b} {'up' if up else 'down'} in {handle.name}")


@task(name="pfc-storm", help={"host": "the host whose NIC storms", "seconds": "how long",
                              "priority": "the priority it pauses (default: the host's "
                                          "RoCE priority)",
                              "lab": "lab name (default: the only running lab)"})
def pfc_storm(c, host, seconds=1.5, priority=-1, lab=""):
    """A host sends PFC without end on one priority for SECONDS (a broken NIC)."""
    try:
        with using(lab) as handle:
            node = handle.topology.nodes.get(host)
            if priority < 0:
                priority = node.nic.roce.priority if node is not None and node.nic else 3
            with console.status(f"{host} storming priority {priority} for {seconds:g} s"):
                storm = actions.pfc_storm(handle, host, priority, seconds)
    except USER_ERRORS as e:
        raise fail(e) from None
    console.print(f"{host}: {storm.frames} PFC frames on priority {priority} over "
                  f"{storm.last - storm.first:.2f} s; see invoke show.pfcwd-stats")


VARIANTS = ("nopfc", "headroom", "remark", "nowd", "updown")


@task(help={"name": "lab name (topologies/NAME) or path to its .clab.yml",
            "kind": "nopfc (pfc_enable removed), headroom (xoff cut to --xoff), remark "
                    "(--host re-marks RoCE to --dscp), nowd (PFC watchdog off), updown "
                    "(summary routes removed)",
            "as_": "the variant's lab name (default: NAME-KIND)",
            "host": "remark: the host", "dscp": "remark: its DSCP (default 0)",
            "xoff": "headroom: bytes (default 1024)",
            "runtime": "netns (default) or containerlab"})
def variant(c, name, kind, as_="", host="", dscp=0, xoff=1024, runtime="netns"):
    """Bring up a variant of a lab under its own name, next to it (./build/variants/NAME/,
    in the directory the command runs in, as results/ is)."""
    from ...checks import deadlock
    edits = {"nopfc": actions.without_pfc, "headroom": actions.headroom_of(xoff),
             "nowd": actions.without_watchdog, "updown": deadlock.up_down_routing,
             "remark": None}
    if kind not in edits:
        raise fail(f"--kind {kind!r}: one of {', '.join(VARIANTS)}")
    if kind == "remark" and not host:
        raise fail("--kind remark needs --host")
    try:
        source = topology.resolve(name)
        new = as_ or f"{live.lab_name(str(source))}-{kind}"
        clab = actions.write_variant(
            source, new, Path.cwd() / "build" / "variants" / new,
            edits[kind], actions.dscp_remarked(dscp) if kind == "remark" else None,
            (host,) if kind == "remark" else ())
        with console.status(f"bringing up {new}"):
            lab = live.up(str(clab), runtime)
    except USER_ERRORS as e:
        raise fail(e) from None
    console.print(f"[green]lab {lab.name} is up[/] ({kind} variant of {name}, files in "
                  f"{clab.parent}); invoke lab.down {lab.name} removes it")


ns = Collection("action", link_down, link_up, pfc_storm, variant)
