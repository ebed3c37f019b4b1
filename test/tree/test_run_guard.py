#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""test/run_guard.py in a pytest run of its own (two xdist workers, as `make test`): the header
gives the free disk, the first failure prints the machine's state, and the deadline lists the test
still running and stops the run, which still prints its summary. The run is started with SIGINT
ignored, as a non-interactive shell starts a background job (`make test &`, a CI script)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

TEST_DIR = Path(__file__).resolve().parents[1]

CONFTEST = f"""
import sys
sys.path.insert(0, {str(TEST_DIR)!r})
from run_guard import RunGuard

def pytest_configure(config):
    if getattr(config, "workerinput", None) is None:
        config.pluginmanager.register(RunGuard(config, config.rootpath), "ethdaq-run-guard")
"""

TESTS = """
import time

def test_fails():
    assert 1 == 2

def test_hangs():
    time.sleep(120)
"""


def test_a_failing_and_a_hanging_run_says_why_and_stops_at_its_deadline(tmp_path):
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_guarded.py").write_text(TESTS)
    env = dict(os.environ, ETHDAQ_TEST_DEADLINE="20")
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider", "-rA", str(tmp_path)],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=110,
                       preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    out = r.stdout + r.stderr
    assert time.monotonic() - t0 < 100, out          # Stopped long before the hanging test ends.
    assert "disk free:" in out.split("created: 2/2 workers")[0], out   # In the header.
    assert "the machine at the first failure (test_guarded.py::test_fails, call)" in out, out
    assert "memory available:" in out and "PID" in out, out
    assert "has passed: tests running" in out and "test_guarded.py::test_hangs" in out, out
    assert "short test summary info" in out and "FAILED test_guarded.py::test_fails" in out, out
    assert r.returncode != 0, out
