"""The CLI as people use it: `ethdaq --version`, --json on every ctl action that changes the
board, `ctl stop` with no run going, `recv` that got nothing, an action's option given to another
or before its action."""

import json
import re
import subprocess

import pytest

from conftest import REPO
from test_cli import run
from board_fakes import fake_board


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


def _ctl_owned_options():
    """[(option, the ctl action that alone takes it)] from the real parser: the options in that
    action's subparser and in no other's."""
    from ethdaq.soc import cli
    actions = cli.make_parser()._subparsers._group_actions[0].choices["ctl"]._subcommands.choices
    takes = {name: {s for a in p._actions for s in a.option_strings[:1]} for name, p in actions.items()}
    return [(option, name) for name, options in takes.items() for option in sorted(options)
            if all(option not in others for other, others in takes.items() if other != name)]


# A value each option takes, to give it on the command line.
OPTION_VALUES = {"--dst-ip": "192.168.1.10", "--dst-port": "5000", "--payload": "1024", "--enable": "0x3",
                 "--dst-mac": "02:00:00:00:00:01", "--backpressure": "0x1", "--gap": "10", "--flush": "1ms",
                 "--mode": "ramp", "--rate": "0.001", "--seed": "3", "--lease": "30", "--to": "192.168.1.10:9100",
                 "--to-mac": "02:00:00:00:00:01", "--from-port": "9101", "--data": "x", "--in": "10ms",
                 "--at": "5.0", "--period": "1ms", "--count": "3", "--guard": "100", "--wait": "5",
                 "--csr": "csr.json"}


def test_every_action_option_is_known_to_the_test_and_every_action_has_some():
    owned = _ctl_owned_options()
    assert {o for o, _ in owned} - {"--no-wait", "--nonzero"} == set(OPTION_VALUES)
    assert {a for _, a in owned} == {"start", "emulator", "claim", "launch", "reboot", "regs", "rx"}


@pytest.mark.parametrize("option, owner", _ctl_owned_options())
def test_an_actions_option_given_to_another_action_is_one_line_naming_its_action(option, owner):
    """Nothing is sent (no board answers at 127.0.0.1:9, and the error comes first)."""
    value = [OPTION_VALUES[option]] if option in OPTION_VALUES else []
    other = "identify" if owner != "identify" else "status"
    r = run("ctl", other, option, *value, "--ip", "127.0.0.1", "--port", "9", "--timeout", "0.1")
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert r.stderr.splitlines() == [f"Error: {option} is for ethdaq ctl {owner}, not {other} "
                                     f"(see 'ethdaq ctl {other} --help')"]


@pytest.mark.parametrize("words", [["stop", "--payload", "100"], ["identify", "--rate", "0.1"],
                                   ["config", "set", "payload=1024", "--mode", "ramp"], ["start", "--lease", "5"]])
def test_the_issues_examples_of_a_misplaced_option_are_refused(words):
    r = run("ctl", *words, "--ip", "127.0.0.1", "--port", "9", "--timeout", "0.1")
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and f"{words[-2]} is for ethdaq ctl" in r.stderr


def test_each_option_parses_with_its_own_action_before_or_after_the_actions_words():
    from ethdaq.soc import cli
    for option, owner in _ctl_owned_options():
        value = [OPTION_VALUES[option]] if option in OPTION_VALUES else []
        words = ["arm"] if owner == "launch" else []
        for argv in (["ctl", owner, *words, option, *value, "--ip", "1.2.3.4"],
                     ["ctl", owner, option, *value, *words, "--ip", "1.2.3.4"]):
            args = cli.make_parser().parse_args(argv)
            assert args.action == owner and getattr(args, "settings", []) == words, argv


@pytest.mark.parametrize("option, owner", _ctl_owned_options())
def test_an_actions_option_before_the_action_is_one_line_saying_where_it_goes(option, owner):
    """`ethdaq ctl --payload 1024 start`: the action's own options come after it (its subparser's);
    only the options every action takes may come first. Nothing is sent."""
    value = [OPTION_VALUES[option]] if option in OPTION_VALUES else []
    r = run("ctl", "--ip", "127.0.0.1", option, *value, owner, "--port", "9", "--timeout", "0.1")
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert r.stderr.splitlines() == [f"Error: {option} is for ethdaq ctl {owner} and comes after it: "
                                     f"ethdaq ctl {owner} {option} ... (see 'ethdaq ctl --help')"]


def test_ctl_help_after_the_shared_options_is_ctls_help():
    for argv in (["ctl", "--ip", "127.0.0.1", "-h"], ["ctl", "--ip", "127.0.0.1", "--port", "9", "--help"]):
        r = run(*argv)
        assert r.returncode == 0 and r.stdout.startswith("usage: ethdaq ctl [-h] ACTION ..."), (argv, r.stderr)


def test_a_key_file_that_cannot_be_read_or_is_not_a_key_is_one_line(tmp_path):
    """ctl and build read key files with the same function as the IOC: the same one-line errors,
    before anything is sent or built."""
    bad = tmp_path / "bad.key"
    bad.write_text("not hex\n")
    for argv, text in ((["ctl", "status", "--ip", "127.0.0.1", "--key-file", str(tmp_path / "missing")],
                        f"cannot read key file {tmp_path / 'missing'}: No such file or directory"),
                       (["ctl", "status", "--ip", "127.0.0.1", "--key-file", str(bad)],
                        f"key file {bad}: a key file holds the key as hex digits"),
                       (["build", "--board", "sim", "--ctl-key-file", str(bad), "--output-dir", str(tmp_path / "b")],
                        f"key file {bad}: a key file holds the key as hex digits")):
        r = run(*argv)
        assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and r.stderr.startswith(f"Error: {text}"), \
            (argv, r.stderr)
    assert not (tmp_path / "b").exists()
