import os
import subprocess
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


# Background builds ---------------------------------------------------------------------------------
# A bitstream build (test_build_ecp5.py) takes about 10 minutes of one core, and the rest of the
# suite is mostly single-threaded simulation. A test marked
#     @pytest.mark.background_build("name", [ethdaq arguments...])
# has its command started as soon as the session's tests are collected (when it is selected), runs
# last, and waits for the command: the build uses the machine's second core meanwhile.
BACKGROUND_BUILDS = {}


def pytest_collection_modifyitems(session, config, items):
    marked = [item for item in items if item.get_closest_marker("background_build")]
    for item in marked:
        items.remove(item)
        items.append(item)


def pytest_collection_finish(session):
    if session.config.option.collectonly:
        return
    for item in session.items:
        marker = item.get_closest_marker("background_build")
        if marker is None or marker.args[0] in BACKGROUND_BUILDS:
            continue
        xfail = item.get_closest_marker("xfail")
        if xfail is not None and xfail.kwargs.get("run", True) is False:
            continue
        name, args = marker.args
        log = REPO / "build" / f"{name}.background.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "w") as f:
            proc = subprocess.Popen(ethdaq_cmd(*args), stdout=f, stderr=subprocess.STDOUT, text=True)
        BACKGROUND_BUILDS[name] = (proc, log)


def background_build(name, timeout):
    """Wait for a background build: (return code, its output)."""
    proc, log = BACKGROUND_BUILDS[name]
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise
    return proc.returncode, log.read_text()


def pytest_sessionfinish(session, exitstatus):
    for proc, _ in BACKGROUND_BUILDS.values():
        if proc.poll() is None:
            proc.kill()
            proc.wait()
