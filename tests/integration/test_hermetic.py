"""The guard that makes the suite prove it is hermetic: namespace commands see a bare python3."""
from __future__ import annotations

import subprocess
import sys


def test_python3_on_path_is_bare_and_ours_is_not():
    bare = subprocess.run(["python3", "-c", "import scapy"], capture_output=True, text=True)
    assert bare.returncode != 0 and "scapy" in bare.stderr
    ours = subprocess.run([sys.executable, "-c", "import scapy, pyroute2, pydantic"])
    assert ours.returncode == 0
