"""The CLI as people use it: `ethdaq --version`, --json on every ctl action that changes the
board, `ctl stop` with no run going, `recv` that got nothing."""

import json
import re
import subprocess

import pytest

from conftest import REPO
from test_cli import run
from test_ctl_values import fake_board


def test_version_prints_the_package_version_and_the_git_revision():
    from ethdaq import __version__
    r = run("--version")
    assert r.returncode == 0, r.stderr
    rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                         text=True, check=True).stdout.strip()
    m = re.fullmatch(r"ethdaq (\S+) \(git ([0-9a-f]{12})(-dirty)?\)\n", r.stdout)
    assert m and m.group(1) == __version__ and m.group(2) == rev, r.stdout


@pytest.mark.parametrize("running, text", [(1, "run 7 stopped"),
                                           (0, "no run was running (run 7, the last, had stopped already)")])
def test_ctl_stop_says_whether_a_run_was_running(running, text):
    board = fake_board(4, running=running)
    try:
        r = run("ctl", "stop", "--ip", "127.0.0.1", "--port", str(board.port))
        rj = run("ctl", "stop", "--json", "--ip", "127.0.0.1", "--port", str(board.port))
    finally:
        board.close()
    assert r.returncode == 0 and r.stdout == text + "\n", r.stderr
    assert json.loads(rj.stdout) == {"run": 7, "was_running": bool(running)}


@pytest.mark.parametrize("args, requests, expected", [
    (["start"], 5, {"run": 7, "dst_ip": "127.0.0.1", "dst_port": 5000, "payload": 1472, "enable": 15,
                    "dst_mac": "00:00:00:00:00:00"}),
    (["emulator", "--mode", "ramp", "--rate", "0.005"], 4, {"mode": "ramp", "rate": 0.005, "seed": 1}),
    (["claim"], 1, {"controller": "127.0.0.1", "lease_ms": 60000}),
    (["release"], 1, {"released": True}),
])
def test_json_is_one_document_on_stdout_for_actions_that_change_the_board(args, requests, expected):
    board = fake_board(requests)
    try:
        r = run("ctl", *args, "--json", "--ip", "127.0.0.1", "--port", str(board.port))
    finally:
        board.close()
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == expected
