"""The lab most integration tests share: a fresh copy of the default lab per module, always
taken down, and proven to leave nothing behind."""
from __future__ import annotations

import pytest

from labs import lab as labs
from tests.conftest import copy_lab
from tests.integration.test_lab import NOTHING, traces


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab = labs.up(str(copy_lab(tmp_path_factory.mktemp("lab"))))
    try:
        yield lab
    finally:
        lab.down()
    assert traces(lab.name) == NOTHING
