"""Fixtures the sonic-mgmt suite's unit tests share: the default lab, and leaf1, the
switch whose DUT most cases are run on with and without a seeded defect."""
import pytest

from rocelab.labs import topology


@pytest.fixture(scope="module")
def lab():
    return topology.load("roce-v2-leafspine")


@pytest.fixture
def node(lab):
    return lab.nodes["leaf1"]
