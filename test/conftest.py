import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent


@pytest.fixture(scope="session")
def repo():
    return REPO


def ethdaq_cmd(*args):
    return [str(VENV_BIN / "ethdaq"), *args]


requires_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")
