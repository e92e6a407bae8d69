"""The DSCP mapping cases pass on the model and fail on a DUT whose classifier departs from
the config's maps (one DSCP in another TC, as an ASIC programmed wrong would have it)."""
from types import SimpleNamespace

import pytest

from rocelab.checks.sonic_mgmt import cases
from rocelab.checks.sonic_mgmt.dut import Dut
from rocelab.checks.sonic_mgmt import test_qos_sai_mapping as mapping


def request():
    return SimpleNamespace(node=SimpleNamespace(user_properties=[]))


def remapped(node, port: str, dscp: int):
    """A DUT whose ``port`` classifies ``dscp`` as another DSCP the config puts in another
    class (TC and PG)."""
    dut = Dut(node)
    table = dut.switch._ports[port].qos.by_dscp
    other = next(d for d in range(64) if table[d] != table[dscp])
    table[dscp] = table[other]
    return dut


@pytest.mark.parametrize("case", [mapping.testQosSaiDscpQueueMapping,
                                  mapping.testQosSaiDscpToPgMapping])
def test_mapping_passes_and_fails_with_one_dscp_remapped(lab, case):
    pair = next(p for p in cases.port_pairs(lab) if p.switch == "leaf1")
    node = lab.nodes[pair.switch]
    case(pair, lambda name: Dut(node), 512, request())
    lossless = next(c for c in cases.lossless_cases(lab) if c.src == pair.src
                    and c.switch == pair.switch)
    with pytest.raises(AssertionError, match="expected"):
        case(pair, lambda name: remapped(node, pair.src, lossless.dscp), 512, request())
