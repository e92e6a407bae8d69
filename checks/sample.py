"""Which destinations a forwarding check probes from a sender: every one on a small fabric;
on a fabric of ``threshold`` hosts or more, a stated sample.

Every host probing every other costs hosts x hosts probes: on a thousand-host fabric that is
days of simulation. Past the threshold a sender probes:

- every candidate in its own L2 domain (its rack): the bridged paths, each one different;
- of the others, ``size`` chosen by a generator seeded from the run's seed and the sender's
  name, one from each other domain in turn (domains in a seeded order, hosts in a seeded
  order within each), so a sample at least as large as the domains reaches every rack, and
  with it every leaf-to-leaf path set.

The same seed gives the same sample; the report says which pairs were probed and how they
were chosen (``record``), so a pair left out is never taken as checked. ``everything``
(``--probe-all``) probes every pair whatever the size, for nightly runs.
"""
from __future__ import annotations

import random
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the CLI reads the defaults without loading the lab code
    from ..labs.domains import Domain
    from ..labs.topology import Topology

DEFAULT_THRESHOLD = 256  # hosts: a fabric this large or larger probes a sample
DEFAULT_SIZE = 16  # destinations outside the sender's domain, per sender


@dataclass(frozen=True)
class Plan:
    """How many hosts the fabric has and what the run asked for."""

    hosts: int
    threshold: int = DEFAULT_THRESHOLD
    size: int = DEFAULT_SIZE
    seed: int = 0
    everything: bool = False

    @property
    def sampled(self) -> bool:
        return not self.everything and self.hosts >= self.threshold

    def how(self) -> str:
        """One sentence for the report."""
        if self.everything:
            return f"every destination (--probe-all; {self.hosts} hosts)"
        if not self.sampled:
            return (f"every destination ({self.hosts} hosts, under the sampling threshold of "
                    f"{self.threshold}, --sample-from)")
        return (f"a sample ({self.hosts} hosts, at or past the sampling threshold of "
                f"{self.threshold}, --sample-from): every host of the sender's own L2 "
                f"domain, and {self.size} others (--sample-size), one per other domain in "
                f"turn, drawn with seed {self.seed} (--seed) and the sender's name; "
                "--probe-all probes every pair")

    def choose(self, sender: str, candidates: Iterable[str],
               domain_of: Mapping[str, Hashable]) -> list[str]:
        """The destinations ``sender`` probes among ``candidates``, sorted by name.
        ``domain_of``: host -> what tells its L2 domain from the others (hosts it lacks
        share one)."""
        pool = sorted(set(candidates) - {sender})
        if not self.sampled:
            return pool
        home = domain_of.get(sender)
        own = [h for h in pool if domain_of.get(h) == home]
        groups: dict[Hashable, list[str]] = {}
        for host in [h for h in pool if h not in own]:
            groups.setdefault(domain_of.get(host), []).append(host)
        rng = random.Random(f"{self.seed}/{sender}")
        order = sorted(groups, key=lambda g: min(groups[g]))
        rng.shuffle(order)
        for name in order:
            rng.shuffle(groups[name])
        others: list[str] = []
        while len(others) < self.size and any(groups.values()):
            for name in order:
                if groups[name] and len(others) < self.size:
                    others.append(groups[name].pop())
        return sorted(own + others)

    def record(self, sender: str, chosen: list[str]) -> dict:
        """What the report says a check probed: the pairs and how they were chosen."""
        return {"how": self.how(), "sampled": self.sampled,
                "pairs": [[sender, dst] for dst in chosen]}


def homes(topo: Topology, domains: list[Domain]) -> dict[str, int]:
    """Host -> its L2 domain's index in ``domains`` (names repeat: every rack of a generated
    fabric has its own Vlan1000), ranked as ``labs.domains.domain_of`` ranks a host's
    domains (untagged first, then its first interface's), from domains computed once."""
    ranked: dict[str, tuple[tuple, int]] = {}
    for i, domain in enumerate(domains):
        for a in domain.attachments:
            first = next(iter(topo.interfaces(a.host)), None)
            rank = ((a.tagged, a.iface != first, a.iface), i)
            ranked[a.host] = min(ranked.get(a.host, rank), rank)
    return {host: i for host, (_, i) in ranked.items()}
