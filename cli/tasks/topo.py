"""``topo.*``: write a lab folder for a leaf-spine RoCE fabric of a given size."""
from __future__ import annotations

from pathlib import Path

from invoke import Collection, Exit, task

from .common import console


@task(name="generate", auto_shortflags=False,
      help={"name": "lab name; the folder is topologies/NAME unless --out is given",
            "hosts_per_leaf": "hosts on each leaf (a rack: one /24 and VLAN)",
            "leaves": "leaves (racks)",
            "spines": "spines of a two-tier fabric (a divisor of the uplinks per leaf); "
                      "0: the fewest that fit, or three tiers beyond one spine's radix",
            "speed": "every port's speed: 100G or 400G",
            "oversubscription": "host over uplink bandwidth per leaf: 1 (non-blocking), 3 (3:1)",
            "radix": "ports per switch",
            "roce_dscp": "DSCP of RoCEv2 data", "roce_priority": "lossless RoCE priority",
            "cnp_dscp": "DSCP of CNPs", "cnp_priority": "priority (strict queue) of CNPs",
            "out": "folder to write (default topologies/NAME)",
            "force": "replace the folder if it exists",
            "routing": "static (STATIC_ROUTE, the default) or bgp (eBGP with FRR, loopbacks)"})
def generate(c, name, hosts_per_leaf=2, leaves=2, spines=0, speed="100G", oversubscription=1.0,
             radix=64, roce_dscp=26, roce_priority=3, cnp_dscp=48, cnp_priority=6, out="",
             force=False, routing="static", time_scale="auto"):
    """Write a lab folder for a leaf-spine RoCE fabric of a given size, with a complete
    lossless profile per switch (docs/lab-guide.md, "Generating a fabric")."""
    from ...labs import generate as gen
    from ...labs.generate_spec import GenerateError, Spec
    spec = Spec(name, hosts_per_leaf, leaves, spines, speed, oversubscription, radix,
                    roce_dscp, roce_priority, cnp_dscp, cnp_priority, routing, str(time_scale))
    try:
        done = gen.write(spec, Path(out) if out else None, force)
    except GenerateError as e:
        raise Exit(f"rocelab: {e}", code=2) from None
    console.print(f"wrote {done.path}: {gen.describe(done.fabric)}", soft_wrap=True)


ns = Collection("topo", generate)
