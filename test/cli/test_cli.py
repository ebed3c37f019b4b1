"""`ethdaq` command line: listing, and one-line errors with non-zero exit and nothing written."""

import ipaddress
import re
import os
import json
import subprocess
import time

import pytest

from conftest import REPO, VENV_BIN, ethdaq_cmd, requires_root
from ethdaq.soc import cli
from ethdaq.soc.sim import list_netns, netns_pids


def run(*args, env=None, cwd=None):
    return subprocess.run(ethdaq_cmd(*args), capture_output=True, text=True, env=env, cwd=cwd, timeout=120)


def assert_one_line_error(r, text):
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("Error: ")
    assert text in lines[0]


def test_boards_lists_fpga_phy_and_link():
    r = run("boards")
    assert r.returncode == 0
    rows = {line.split()[0]: line for line in r.stdout.splitlines()[1:]}
    expected = {
        "sim":                  ("Verilator",            "GMII model", "1G",   "verilator"),
        "sim10g":               ("Verilator",            "XGMII model", "10G", "verilator"),
        "colorlight_i5":        ("LFE5U-25F-6BG381C",    "RGMII",      "1G",   "trellis"),
        "colorlight_5a_75b":    ("LFE5U-25F-6BG256C",    "RGMII",      "1G",   "trellis"),
        "lattice_versa_ecp5":   ("LFE5UM5G-45F-8BG381C", "RGMII",      "1G",   "trellis"),
        "gsd_butterstick":      ("LFE5UM5G-85F-8BG381C", "RGMII",      "1G",   "trellis"),
        "digilent_nexys_video": ("XC7A200T-1SBG484C",    "RGMII",      "1G",   "vivado, yosys"),
        "xilinx_kc705":         ("XC7K325T-2FFG900C",    "GMII",       "1G",   "vivado, yosys"),
        "digilent_arty":        ("XC7A35TICSG324-1L",    "MII",        "100M", "vivado, yosys"),
        "xilinx_kcu116":        ("XCKU5P-2FFVB676E",     "10GBASE-R",  "10G",  "vivado, yosys"),
    }
    assert sorted(rows) == sorted(expected)
    for name, (fpga, phy, link, toolchains) in expected.items():
        assert fpga in rows[name] and phy in rows[name] and f" {link} " in rows[name], rows[name]
        assert rows[name].rstrip().endswith(toolchains), rows[name]


def test_sim_runs_only_a_simulated_board():
    assert_one_line_error(run("sim", "--board", "colorlight_i5"),
                          "--board must be a simulated board (sim, sim10g), not 'colorlight_i5'")
    assert_one_line_error(run("sim", "--board", "nope"), "unknown board 'nope'")


def _openfpgaloader_list(what):
    r = subprocess.run(["openFPGALoader", f"--list-{what}"], capture_output=True, text=True, timeout=30)
    return {line.split()[0] for line in r.stdout.splitlines() if line.strip()}


def test_every_board_loads_with_a_board_or_cable_openfpgaloader_knows():
    """The loader arguments name boards and cables of the openFPGALoader we install (Debian's),
    asked for its own lists: a typo cannot reach a user's bench."""
    from ethdaq.boards import BOARDS
    boards, cables = _openfpgaloader_list("boards"), _openfpgaloader_list("cables")
    for board in BOARDS.values():
        if board.is_sim or board.loader is None:
            continue
        args = dict(zip(board.loader[::2], board.loader[1::2])) if "--dfu" not in board.loader else {}
        if "--board" in args:
            assert args["--board"] in boards, (board.name, args)
        elif "--cable" in args:
            assert args["--cable"] in cables, (board.name, args)
        else:
            assert board.loader[0] == "--dfu" and "--vid" in board.loader and "--pid" in board.loader, board.name


@pytest.mark.parametrize("board, extra, expected", [
    ("digilent_nexys_video", [], ["--board", "nexysVideo"]),
    ("colorlight_i5", [], ["--cable", "dirtyJtag"]),
    ("colorlight_i5", ["--cable", "cmsisdap"], ["--cable", "cmsisdap"]),
])
def test_load_runs_openfpgaloader_with_the_boards_arguments(tmp_path, board, extra, expected):
    bit = tmp_path / "design.bit"
    bit.write_bytes(b"\xff" * 64)
    fake = tmp_path / "bin" / "openFPGALoader"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {tmp_path}/args\n")
    fake.chmod(0o755)
    env = dict(os.environ, PATH=f"{fake.parent}:{os.environ['PATH']}")
    r = run("load", "--board", board, "--bitstream", str(bit), *extra, env=env)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "args").read_text().splitlines() == [*expected, str(bit)]


def test_help_has_examples_for_every_subcommand():
    r = run("--help")
    assert r.returncode == 0
    for sub in ("boards", "build", "sim", "load", "ctl"):
        assert sub in r.stdout
    assert "examples:" in r.stdout


def test_unknown_board(tmp_path):
    r = run("build", "--board", "nexys", "--output-dir", str(tmp_path / "out"))
    assert_one_line_error(r, "unknown board 'nexys'; expected one of: colorlight_5a_75b, colorlight_i5, "
                             "digilent_arty, digilent_nexys_video, gsd_butterstick, lattice_versa_ecp5, sim, sim10g, xilinx_kc705")
    assert not (tmp_path / "out").exists()


def test_unsupported_toolchain(tmp_path):
    r = run("build", "--board", "colorlight_i5", "--toolchain", "vivado", "--output-dir", str(tmp_path / "out"))
    assert_one_line_error(r, "toolchain for board colorlight_i5 must be one of trellis, not 'vivado'")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("args, text", [
    (["--ip", "192.168.1"], "IP address must be dotted IPv4 like 192.168.1.50, not '192.168.1'"),
    (["--mac", "10:e2:d5:00:00"], "MAC address must be six hex bytes"),
    (["--netmask", "33"], "netmask must be a prefix length 0..32 like 24 (or /24) or a mask like 255.255.255.0, not '33'"),
    (["--netmask", "255.0.255.0"], "netmask must be a prefix length 0..32"),
    (["--mac", "11:e2:d5:00:00:00"], "MAC address must be unicast"),
    (["--gateway", "192.168.1"], "gateway must be dotted IPv4 like 192.168.1.254 (or none), not '192.168.1'"),
    (["--gateway", "192.168.2.1"], "gateway must be a host of the board's subnet 192.168.1.0/24 other than the board "
                                   "(192.168.1.50), not 192.168.2.1"),
    (["--gateway", "192.168.1.50"], "gateway must be a host of the board's subnet 192.168.1.0/24"),
    (["--ctl-port", "70000"], "port must be an integer in 1..65535, not '70000'"),
    (["--sys-clk-freq", "5"], "frequency must be in Hz between 1e6 and 500e6, like 60e6, not '5'"),
    (["--ptp-log-sync", "9"], "log2 interval must be an integer from -10 to 6, not '9'"),
    (["--ptp-log-announce", "x"], "log2 interval must be an integer from -10 to 6, not 'x'"),
    (["--ptp-domain", "256"], "PTP domain must be an integer from 0 to 255, not '256'"),
    (["--build-id", "a b"], "build id must be 1 to 32 letters, digits, '.', '_' or '-', not 'a b'"),
    (["--channels", "0"], "channels must be an integer from 1 to 8 (the control protocol's channel mask is 8 bits), not '0'"),
    (["--channels", "9"], "channels must be an integer from 1 to 8 (the control protocol's channel mask is 8 bits), not '9'"),
    (["--channels", "two"], "channels must be an integer from 1 to 8 (the control protocol's channel mask is 8 bits), not 'two'"),
    (["--sample-width", "12"], "sample width must be 8, 16, 32 or 64 bits, not '12'"),
    (["--ptp-role", "boss"], "invalid choice: 'boss'"),
    (["--ptp-transport", "tcp"], "invalid choice: 'tcp'"),
    (["--fasttrack-port", "7000"], "fast-track port 7000 is the control port's"),
    (["--fasttrack-port", "319"], "fast-track port 319 is PTP's"),
    (["--fasttrack-port", "9000", "--fasttrack-port", "9000"], "fast-track ports must be distinct"),
    (["--fasttrack-port", "1"] * 1 + ["--fasttrack-port", "2", "--fasttrack-port", "3", "--fasttrack-port", "4",
                                      "--fasttrack-port", "6"], "at most 4 fast-track ports"),
    (["--dhcp", "--ctl-port", "68"], "control port 68 is the DHCP client's (--dhcp)"),
    (["--dhcp-time-scale", "0"], "DHCP time scale must be an integer from 1 to 100000, not '0'"),
])
def test_bad_addresses(args, text):
    assert_one_line_error(run("build", "--board", "sim", *args), text)


@pytest.mark.parametrize("board, toolchain, tool", [("sim", None, "Verilator"), ("digilent_arty", "vivado", "vivado")])
def test_a_seed_is_only_for_nextpnr(tmp_path, board, toolchain, tool):
    r = run("build", "--board", board, *(["--toolchain", toolchain] if toolchain else []), "--seed", "3",
            "--output-dir", str(tmp_path / "out"))
    assert_one_line_error(r, f"--seed is nextpnr's, for ECP5 boards; {board} builds with {tool}")
    assert not (tmp_path / "out").exists()


def test_a_front_end_decides_its_own_channels(tmp_path):
    r = run("build", "--board", "sim", "--channels", "2", "--frontend", str(REPO / "examples" / "frontends" / "triggered_adc.py"),
            "--output-dir", str(tmp_path / "out"))
    assert_one_line_error(r, "--channels: a front-end's channels are those it drives")
    assert not (tmp_path / "out").exists()


def test_the_data_path_profile_reaches_the_soc():
    """--channels and --sample-width become the SoC's nchannels and sample_width (by default
    SoCConfig's: 4 channels, or what a front-end drives, of 16 bits)."""
    from ethdaq.boards import get_board
    config = cli.build.soc_config(cli.make_parser().parse_args(["build", "--board", "sim", "--channels", "8",
                                                                "--sample-width", "32"]), get_board("sim"))
    assert (config.nchannels, config.sample_width) == (8, 32)
    config = cli.build.soc_config(cli.make_parser().parse_args(["build", "--board", "sim"]), get_board("sim"))
    assert (config.nchannels, config.sample_width) == (4, 16)


def test_sim_board_clock_is_fixed():
    assert_one_line_error(run("build", "--board", "sim", "--sys-clk-freq", "50e6"), "sys clock is fixed at 125 MHz")


def test_missing_toolchain_is_named_with_its_package(tmp_path):
    env = dict(os.environ, PATH=str(VENV_BIN))  # No make, gcc or verilator on PATH.
    r = run("build", "--board", "sim", "--output-dir", str(tmp_path / "out"), env=env)
    assert_one_line_error(r, "required tool 'make' not found on PATH; install it with 'apt-get install make'")
    assert not (tmp_path / "out").exists()


def test_ecp5_build_refuses_tmp_output_dir():
    r = run("build", "--board", "colorlight_i5", "--output-dir", "/tmp/ethdaq-bits")
    assert_one_line_error(r, "output directory must not be under /tmp")


def test_load_without_bitstream(tmp_path):
    r = run("load", "--board", "colorlight_i5", "--output-dir", str(tmp_path))
    assert_one_line_error(r, "bitstream")
    assert "not found; build it first with 'ethdaq build --board colorlight_i5'" in r.stderr


def test_load_sim_board_is_refused():
    assert_one_line_error(run("load", "--board", "sim"), "board 'sim' is simulated")


def test_load_a_board_openfpgaloader_cannot_program_is_refused():
    assert_one_line_error(run("load", "--board", "xilinx_kcu116"),
                          "openFPGALoader cannot load xilinx_kcu116 (XCKU5P-2FFVB676E); load the bitstream "
                          "with Vivado's hardware manager")


def test_sim_needs_root(monkeypatch, capsys):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert cli.main(["sim"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["Error: the simulation needs root to create its network namespace; run as root (e.g. sudo ethdaq sim)"]


@requires_root
@pytest.mark.network
@pytest.mark.parametrize("busy", [True, False], ids=["in-use", "left-behind"])
def test_sim_refuses_a_namespace_that_exists_and_leaves_it_alone(busy):
    ns = "ethdaq-busy"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    # A process in the namespace is what a running simulation looks like; none, a killed one's.
    holder = subprocess.Popen(["ip", "netns", "exec", ns, "sleep", "60"]) if busy else None
    try:
        if holder is not None:
            deadline = time.monotonic() + 10
            while not netns_pids(ns):
                assert time.monotonic() < deadline
                time.sleep(0.05)
        r = run("sim", "--netns", ns)
        assert_one_line_error(r, f"network namespace '{ns}' is already in use" if busy else
                              f"network namespace '{ns}' exists but no process runs in it")
        assert ns in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    finally:
        if holder is not None:
            holder.kill()
            holder.wait()
        subprocess.run(["ip", "netns", "del", ns], check=True)


def test_sim_refuses_host_ip_outside_board_subnet():
    assert_one_line_error(run("sim", "--ip", "10.0.0.2", "--host-ip", "192.168.1.100"),
                          "must share a /24 subnet")


@pytest.mark.parametrize("where", ["--ip", "--board"])
def test_ctl_timeout_is_one_line(where):
    # Loopback only: nothing listens on this port, so the request times out (or is refused).
    r = run("ctl", "identify", where, "127.0.0.1", "--port", "9", "--timeout", "0.2")
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("Error: no answer from 127.0.0.1:9")


@pytest.mark.parametrize("args, message", [
    (["config", "set", "payload"], "a setting must be NAME=VALUE, not 'payload'"),
    (["config", "set", "colour=red"], "setting must be one of ip, mac, dst_ip"),
    (["config", "set", "ptp_transport=l2"], "ptp_transport is fixed at build time"),
    (["config", "set", "ip=224.0.0.1"], "ip must be a unicast host address"),
    (["config", "set", "ip=192.168.1"], "ip must be dotted IPv4"),
    (["config", "set", "mac=01:00:5e:00:00:01"], "mac must be a unicast address"),
    (["config", "set", "ptp_role=boss"], "ptp_role must be a number (auto, master, slave or a number), not 'boss'"),
    (["config", "set", "dst_ip=10.0.0"], "dst_ip must be dotted IPv4"),
    (["config", "set", "dst_mac=10:e2"], "MAC address must be six hex bytes"),
    (["config", "set", "flush=2s"], "flush must be 0 (off) or 1us to 1s, not 2s"),
    (["config", "set", "flush=500ns"], "flush must be 0 (off) or 1us to 1s, not 500ns"),
    (["config", "set", "flush=soon"], "a duration like 2ms, 500us, 1s or 800ns, not 'soon'"),
    (["start", "--flush", "5s"], "flush must be 0 (off) or 1us to 1s, not 5s"),
    (["config", "frobnicate"], "usage: ethdaq ctl config [get] | config set NAME=VALUE"),
    (["status", "extra"], "ethdaq ctl status takes no arguments but options, not 'extra'"),
    (["launch", "fire"], "usage: ethdaq ctl launch [arm|stop|status]"),
    (["launch", "arm", "--in", "1ms"], "needs --to HOST:PORT and --to-mac MAC"),
    (["launch", "arm", "--to", "10.0.0.1:9100", "--to-mac", "02:00:00:00:00:01"], "give the launch time as --in TIME"),
    (["launch", "arm", "--to", "10.0.0.1:9100", "--to-mac", "02:00:00:00:00:01", "--in", "1ms", "--at", "5.0"],
     "give the launch time as --in TIME"),
    (["launch", "arm", "--to", "10.0.0.1", "--to-mac", "02:00:00:00:00:01", "--in", "1ms"], "--to must be HOST:PORT"),
    (["launch", "arm", "--in", "soon"], "a duration like 2ms, 500us, 1s or 800ns, not 'soon'"),
])
def test_ctl_config_arguments_are_checked_before_anything_is_sent(args, message):
    # Port 9 on loopback: had anything been sent, the error would be a timeout instead.
    assert_one_line_error(run("ctl", *args, "--ip", "127.0.0.1", "--port", "9", "--timeout", "0.2"), message)


def test_config_assignments_parse_names_numbers_and_addresses():
    from ethdaq.wire import protocol
    parse = protocol.parse_config_assignment
    assert parse("ptp_role=slave") == ("ptp_role", 2)
    assert parse("emulator_mode=pulse") == ("emulator_mode", 3)
    assert parse("ptp_log_sync=-3") == ("ptp_log_sync", -3)
    assert parse("enable=0x3") == ("enable", 3)
    assert parse("dst_ip=192.168.1.7") == ("dst_ip", 0xC0A80107)
    assert parse("dst_mac=02:00:00:00:00:01") == ("dst_mac", bytes.fromhex("020000000001"))
    assert parse("flush=100us") == ("flush", 100_000)
    assert parse("flush=1.5ms") == ("flush", 1_500_000)
    assert parse("flush=off") == parse("flush=0") == ("flush", 0)
    assert parse("flush=1s") == ("flush", 10**9) and parse("flush=1us") == ("flush", 1000)


def test_durations_print_as_they_parse():
    from ethdaq.wire.protocol import format_duration_ns, parse_duration_ns
    for ns in (1000, 250_000, 1_000_000, 1_500_000, 10**9, 1234):
        assert parse_duration_ns(format_duration_ns(ns)) == ns
    assert format_duration_ns(1_000_000) == "1ms" and format_duration_ns(250_000) == "250us"


def test_etherbone_port_clash_is_one_line_before_any_build(tmp_path):
    r = run("build", "--board", "sim", "--with-etherbone", "--etherbone-port", "7000",
            "--output-dir", str(tmp_path / "out"))
    assert_one_line_error(r, "Etherbone port must be in 1..65535 and free, not 7000 (used by the control port)")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("port", ["319", "320"])
def test_control_port_clashing_with_ptp_is_refused(tmp_path, port):
    r = run("build", "--board", "sim", "--ctl-port", port, "--output-dir", str(tmp_path / "out"))
    assert_one_line_error(r, f"control port {port} is reserved for PTP (319 event, 320 general)")
    assert not (tmp_path / "out").exists()


def test_control_port_clashing_with_data_port_is_refused(tmp_path):
    r = run("build", "--board", "sim", "--ctl-port", "5000", "--output-dir", str(tmp_path / "out"))
    assert_one_line_error(r, "control port 5000 is already in use by the DAQ data stream")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value, text", [
    ("300.1.2.3/8", "'300.1.2.3/8' is not an IPv4 address or network like 192.168.1.0/24"),
    ("192.168.1.5/24", "has host bits set"),
    (",".join(f"10.0.0.{i}" for i in range(9)), "--ctl-allow takes at most 8 networks, not 9"),
])
def test_a_bad_allow_list_is_a_one_line_error(value, text, tmp_path):
    r = run("build", "--board", "sim", "--ctl-allow", value, "--output-dir", str(tmp_path / "b"))
    assert_one_line_error(r, text)
    assert not (tmp_path / "b").exists()


def test_the_netmask_is_a_prefix_or_a_mask_and_defaults_to_the_addresss_class():
    from ethdaq.soc.socconfig import classful_netmask, parse_netmask
    assert parse_netmask("24") == parse_netmask("/24") == parse_netmask("255.255.255.0") == 0xFFFFFF00
    assert parse_netmask("0") == 0 and parse_netmask("32") == 0xFFFFFFFF
    assert [classful_netmask(int(ipaddress.IPv4Address(a))) for a in ("10.1.2.3", "172.16.0.9", "192.168.1.50")] == \
        [0xFF000000, 0xFFFF0000, 0xFFFFFF00]
    from ethdaq.boards import get_board
    args = cli.make_parser().parse_args(["build", "--board", "sim", "--netmask", "/20"])
    assert cli.build.soc_config(args, get_board("sim")).netmask == 0xFFFFF000
    assert cli.build.soc_config(cli.make_parser().parse_args(["build", "--board", "sim"]), get_board("sim")).netmask is None


def test_the_allow_list_reaches_the_firmware_as_networks():
    from ethdaq.boards import get_board
    from ethdaq.soc.daqsoc import DAQSoC
    from ethdaq.soc.socconfig import SoCConfig
    soc = DAQSoC(get_board("sim"), SoCConfig(ctl_allow=["192.168.1.0/24", "10.0.0.7"]))
    c = {k: v.value if hasattr(v, "value") else v for k, v in soc.constants.items()}
    assert (c["ETHDAQ_CTL_ALLOW_0_NET"], c["ETHDAQ_CTL_ALLOW_0_MASK"]) == (0xC0A80100, 0xFFFFFF00)
    assert (c["ETHDAQ_CTL_ALLOW_1_NET"], c["ETHDAQ_CTL_ALLOW_1_MASK"]) == (0x0A000007, 0xFFFFFFFF)
    assert "ETHDAQ_CTL_ALLOW_2_NET" not in c


def test_the_gateway_reaches_the_firmware_and_the_gateware_and_defaults_to_none():
    from ethdaq.boards import get_board
    from ethdaq.soc.daqsoc import DAQSoC
    from ethdaq.soc.socconfig import SoCConfig
    board = get_board("sim")
    args = cli.make_parser().parse_args(["build", "--board", "sim", "--ip", "10.1.2.3", "--netmask", "16",
                                         "--gateway", "10.1.0.1"])
    config = cli.build.soc_config(args, board).resolve(board)
    assert (config.netmask, config.gateway) == (0xFFFF0000, 0x0A010001)
    assert cli.build.soc_config(cli.make_parser().parse_args(["build", "--board", "sim"]), board).gateway == 0
    soc = DAQSoC(board, SoCConfig(ip_address="10.1.2.3", netmask="16", gateway="10.1.0.1"))
    c = {k: v.value if hasattr(v, "value") else v for k, v in soc.constants.items()}
    assert (c["ETHDAQ_NETMASK"], c["ETHDAQ_GATEWAY"]) == (0xFFFF0000, 0x0A010001)
    assert (soc.netaddr._netmask.storage.reset.value, soc.netaddr._gateway.storage.reset.value) == (0xFFFF0000, 0x0A010001)


def test_the_dhcp_client_is_off_by_default_and_its_build_serves_port_68():
    """--dhcp: the firmware's constants, port 68 in the control mailbox and the receive audit; a
    lease-time scale for the simulated board only. Without it, none of them."""
    from ethdaq.boards import get_board
    from ethdaq.soc.daqsoc import DAQSoC
    from ethdaq.soc.socconfig import SoCConfig
    board = get_board("sim")
    args = cli.make_parser().parse_args(["build", "--board", "sim", "--dhcp", "--dhcp-time-scale", "4000"])
    config = cli.build.soc_config(args, board)
    soc = DAQSoC(board, config)
    c = {k: v.value if hasattr(v, "value") else v for k, v in soc.constants.items()}
    assert "ETHDAQ_DHCP" in c and c["ETHDAQ_DHCP_TIME_SCALE"] == 4000
    assert 68 in soc.ctlport.udp_ports and 68 in soc.rx_audit.udp_ports
    plain = DAQSoC(board, SoCConfig())
    c = {k: v.value if hasattr(v, "value") else v for k, v in plain.constants.items()}
    assert "ETHDAQ_DHCP" not in c and 68 not in plain.ctlport.udp_ports and 68 not in plain.rx_audit.udp_ports
    with pytest.raises(ValueError, match="--dhcp-time-scale shortens leases on the simulated board; colorlight_i5"):
        SoCConfig(with_dhcp=True, dhcp_time_scale=1000).resolve(get_board("colorlight_i5"))
    assert SoCConfig(with_dhcp=True).resolve(get_board("colorlight_i5")).dhcp_time_scale == 1


def test_probe_table_prints_each_class_in_ns_and_its_histogram():
    from ethdaq.soc.cli.ctl import probe_table
    from ethdaq.wire import protocol
    bins = [0] * protocol.PROBE_NBINS
    bins[4], bins[5] = 3, 1                      # 16-31 and 32-63 cycles.
    report = protocol.ProbeReport(8000, 1, 0, 0, 2, {
        "tx_cpu": protocol.ProbeClass("tx_cpu", 4, 19 * 3 + 40, 19**2 * 3 + 40**2, 19, 40, bins),
        "rx_fasttrack": protocol.ProbeClass("rx_fasttrack", 0, 0, 0, 0xFFFF, 0, [0] * protocol.PROBE_NBINS)})
    text = "\n".join(probe_table(report))
    assert "8 ns cycles" in text
    # Mean 24.25 cycles, standard deviation 9.093 cycles: 3 sigma 218.2 ns.
    assert re.search(r"tx_cpu\s+4\s+152 ns\s+194\.0 ns\s+218\.2 ns\s+320 ns", text), text
    assert re.search(r"rx_fasttrack\s+0\s+-", text), text
    assert "unpaired: tx 1, rx 0; not recorded (overflows): tx 0, rx 2" in text
    assert "16-31: 3, 32-63: 1" in text


def test_rules_set_arguments_become_match_bits_and_bad_rules_are_one_line_errors():
    from ethdaq.soc.cli.common import CLIError
    from ethdaq.soc.cli.ctl import parse_rule
    from ethdaq.wire import protocol
    r = parse_rule(["1", "action=drop", "port=9100", "proto=17", "src=10.0.0.7"], ctl_port=7000)
    assert r == dict(index=1, enable=1, action=protocol.RULE_ACTIONS["drop"], port=9100, proto=17, src_ip=0x0A000007,
                     match=protocol.RULE_MATCH_PORT | protocol.RULE_MATCH_PROTO | protocol.RULE_MATCH_SRC)
    assert parse_rule(["2", "enable=0"], ctl_port=7000) == dict(index=2, enable=0, action=0, match=0)
    for words, text in ((["1", "action=drop", "port=7000"], "control port"), (["1", "action=fasttrack"], "UDP destination port"),
                        (["x"], "index must be a number"), (["1", "colour=red"], "unknown rule field"),
                        (["1", "action=keep"], "action must be one of"), (["9"], "rule index must be 0..3"),
                        (["1", "port=70000"], "port must be 0..65535")):
        with pytest.raises(CLIError, match=text):
            parse_rule(words, ctl_port=7000)


def test_front_end_registers_are_named_from_the_builds_csr_json_and_misuse_is_one_line(tmp_path):
    from ethdaq.host.csrmap import frontend_registers
    csr = tmp_path / "csr.json"
    csr.write_text(json.dumps({"csr_bases": {"frontend": 0xF0001000, "streamer": 0xF0000800}, "csr_registers": {
        "frontend_threshold": {"addr": 0xF0001000, "size": 1, "type": "rw"},
        "frontend_time":      {"addr": 0xF0001008, "size": 2, "type": "rw"},
        "frontend_events":    {"addr": 0xF0001004, "size": 1, "type": "ro"},
        "streamer_enable":    {"addr": 0xF0000800, "size": 1, "type": "rw"}}}))
    assert [(r.name, r.offset, r.words, r.writable) for r in frontend_registers(csr).values()] == [
        ("threshold", 0, 1, True), ("events", 4, 1, False), ("time", 8, 2, True)]
    base = ["ctl", "regs"]
    opts = ["--board", "127.0.0.1", "--timeout", "0.1"]
    for args, text in (([], "needs the build's register map: --csr"),
                       (["colour=1", "--csr", str(csr)], "no front-end register 'colour'; there are: threshold, events, time"),
                       (["events=1", "--csr", str(csr)], "'events' is read-only"),
                       (["threshold=x", "--csr", str(csr)], "the value must be a number"),
                       (["threshold=0x100000000", "--csr", str(csr)], "threshold holds 32 bits"),
                       (["--csr", str(tmp_path / "none.json")], "not found")):
        r = run(*base, *args, *opts)
        assert r.returncode == 2 and text in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"csr_bases": {"streamer": 0}, "csr_registers": {}}))
    r = run(*base, "--csr", str(plain), *opts)
    assert_one_line_error(r, f"{plain}: its build has no front-end registers (only streamer); "
                             "was the board built with --frontend?")
    assert "KeyError" not in r.stderr
    for text in ("{", "[]", json.dumps({"csr_bases": {"frontend": 0}})):
        plain.write_text(text)
        assert_one_line_error(run(*base, "--csr", str(plain), *opts), f"{plain}: not a build's csr.json")


@requires_root
def test_sim_with_a_broken_front_end_stops_before_building_and_leaves_no_namespace(tmp_path):
    bad = tmp_path / "adc.py"
    bad.write_text("def frontend(ctx)\n")
    ns = "ethdaq-fe-broken"
    r = run("sim", "--frontend", str(bad), "--netns", ns, "--output-dir", str(tmp_path / "out"))
    assert_one_line_error(r, f"{bad}: line 1")
    assert ns not in list_netns()
    assert not (tmp_path / "out").exists()


def test_ctl_rx_prints_each_counter_with_what_it_counts_and_misuse_is_one_line():
    from board_fakes import ScriptedBoard, seq_of
    from ethdaq.wire import protocol
    records = [(0x00, 1234), (0x06, 0), (0x10, 3), (0x41, 2), (0x7E, 5)]   # 0x7E: a newer board's counter.

    def answer(req):
        assert req == protocol.rx_stats_request(seq_of(req))
        return protocol.pack_header(protocol.MSG_RX_STATS | protocol.RESPONSE, seq_of(req)) + \
            protocol.rx_stats_body(records)
    board = ScriptedBoard([answer] * 3)
    opts = ["--board", "127.0.0.1", "--port", str(board.port)]
    try:
        r = run("ctl", "rx", *opts)
        assert r.returncode == 0, r.stderr
        lines = [line.split(None, 2) for line in r.stdout.splitlines()]
        assert lines == [["rx_ok", "1234", protocol.RX_COUNTERS[0][2]],
                         ["not_ours", "0", protocol.RX_COUNTER_DESCRIPTIONS["not_ours"]],
                         ["udp_port", "3", "UDP to a port nothing on the board listens on"],
                         ["ctl_magic", "2", "control: wrong magic (not this protocol)"],
                         ["code_0x7e", "5", "a counter this host does not know (a newer board)"]]
        r = run("ctl", "rx", "--nonzero", *opts)
        assert [line.split()[0] for line in r.stdout.splitlines()] == ["rx_ok", "udp_port", "ctl_magic", "code_0x7e"]
        r = run("ctl", "rx", "--nonzero", "--json", *opts)
        assert list(json.loads(r.stdout).items()) == [("rx_ok", 1234), ("udp_port", 3), ("ctl_magic", 2),
                                                      ("code_0x7e", 5)]
    finally:
        board.close()
    assert len(board.seen) == 3
    assert_one_line_error(run("ctl", "rx", "all", "--board", "127.0.0.1", "--timeout", "0.1"),
                          "ethdaq ctl rx takes no arguments but options, not 'all'")
    assert_one_line_error(run("ctl", "status", "--nonzero", "--board", "127.0.0.1", "--timeout", "0.1"),
                          "--nonzero is for ethdaq ctl rx, not status")


# Options before, between or after the words of `ethdaq ctl` ---------------------------------------

CTL_OPTS = ["--ip", "192.168.1.50", "--port", "7001", "--json"]   # Those every action takes.


@pytest.mark.parametrize("words, own", [
    (["config", "set", "payload=1472", "dst_port=6000"], []),
    (["config", "get"], []),
    (["rules", "set", "1", "action=drop", "port=9100"], []),
    (["launch", "arm"], ["--to", "10.0.0.1:9100", "--to-mac", "02:00:00:00:00:01", "--in", "10ms",
                         "--period", "1ms", "--count", "100"]),
    (["probe", "clear"], []),
    (["regs", "threshold=1500", "window"], ["--csr", "build/sim/csr.json"]),
    (["start"], ["--dst-port", "5000", "--payload", "1024"]),
])
def test_ctl_options_may_come_before_between_or_after_the_words(words, own):
    """`ethdaq ctl config --ip B set payload=1472` is `ethdaq ctl config set payload=1472 --ip B`
    and `ethdaq ctl --ip B config set payload=1472`: the same namespace wherever the options stand
    (each option with its value stays whole); the action's own options anywhere after it, the
    options every action takes before it too."""
    after = vars(cli.make_parser().parse_args(["ctl", *words, *CTL_OPTS, *own]))
    assert after["action"] == words[0] and after.get("settings", []) == words[1:]
    orders = [["ctl", *CTL_OPTS, *words, *own],                                   # Common ones first.
              ["ctl", words[0], *CTL_OPTS, *own, *words[1:]],                     # After the action.
              ["ctl", *CTL_OPTS[:2], *words[:2], *own, *CTL_OPTS[2:], *words[2:]]]  # Spread.
    for argv in orders:
        assert vars(cli.make_parser().parse_args(argv)) == after, argv


def test_ctl_config_set_with_options_first_sends_the_same_request_to_a_board():
    """End to end, against a board on loopback: the request of `ctl config --ip B set payload=1024
    dst_port=6000` is, byte for byte past the seq, that of the same words with the options last."""
    from board_fakes import ScriptedBoard, config_answer
    from board_fakes import identify_answer
    from ethdaq.wire import protocol
    # payload: checked against IDENTIFY first, then the link budget asks IDENTIFY for the front-end's rates.
    board = ScriptedBoard([identify_answer, config_answer, identify_answer] * 2)
    opts = ["--ip", "127.0.0.1", "--port", str(board.port), "--json"]
    try:
        first = run("ctl", "config", *opts, "set", "payload=1024", "dst_port=6000")
        second = run("ctl", "config", "set", "payload=1024", "dst_port=6000", *opts)
    finally:
        board.close()
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert json.loads(first.stdout)["payload"] == 1024 and first.stdout == second.stdout
    expected = protocol.config_set_request(0, payload=1024, dst_port=6000)
    assert [req[:4] + bytes(4) + req[8:] for req in board.seen[1::3]] == [expected] * 2


# Output into a pipe nobody reads any more (`ethdaq ... | head -1`) ---------------------------------

def run_into_closed_pipe(*args):
    """`ethdaq ARGS` with stdout a pipe whose reader has gone (as after `head -1` read its line):
    the read end is closed before the command starts, so its first write meets it, whatever the
    pipe's buffer would have held."""
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run(ethdaq_cmd(*args), stdout=w, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(w)
    return p


@pytest.mark.parametrize("args", [["boards"], ["--help"], ["ctl", "--help"], ["recv", "--help"],
                                  ["discover", "--help"], ["plot", "--help"]])
def test_output_into_a_closed_pipe_ends_quietly(args):
    """Nothing on stderr; exit status 141 (128 + SIGPIPE, as the shell reports `seq` cut by
    `head`), but 0 for help, whose writer in argparse drops write errors itself."""
    p = run_into_closed_pipe(*args)
    assert "Traceback" not in p.stderr and p.stderr == "", p.stderr
    assert p.returncode == (0 if "--help" in args else cli.EXIT_BROKEN_PIPE) and cli.EXIT_BROKEN_PIPE == 141


def test_a_ctl_table_into_a_closed_pipe_ends_quietly_and_head_gets_its_line():
    """`ethdaq ctl rx` against a board on loopback: into a pipe whose reader has gone, and through
    the real `head -1` (which reads one line and exits) in a shell pipeline."""
    from board_fakes import ScriptedBoard, seq_of
    from ethdaq.wire import protocol
    records = [(code, 1000 + code) for code, _, _ in protocol.RX_COUNTERS]

    def answer(req):
        return protocol.pack_header(protocol.MSG_RX_STATS | protocol.RESPONSE, seq_of(req)) + \
            protocol.rx_stats_body(records)
    board = ScriptedBoard([answer] * 2)
    try:
        p = run_into_closed_pipe("ctl", "rx", "--board", "127.0.0.1", "--port", str(board.port))
        assert "Traceback" not in p.stderr and p.stderr == "", p.stderr
        assert p.returncode == 141
        cmd = " ".join(ethdaq_cmd("ctl", "rx", "--board", "127.0.0.1", "--port", str(board.port)))
        sh = subprocess.run(["bash", "-c", f"set -o pipefail; {cmd} | head -1"], capture_output=True, text=True,
                            timeout=120)
    finally:
        board.close()
    assert sh.stdout.split()[:2] == ["rx_ok", "1000"] and "Traceback" not in sh.stderr, sh.stderr
    assert sh.returncode in (0, 141)   # 141 if head had gone before the table's last write.


def test_discover_lists_each_board_that_answers_once():
    """`ethdaq discover` against a board on loopback listening on every address: the IDENTIFY goes
    to 127.255.255.255 (a broadcast, SO_BROADCAST) three times; the board answers every one, and
    is listed once. With nobody there: a one-line message on stderr, exit 1."""
    from board_fakes import ScriptedBoard, seq_of
    from ethdaq.wire import protocol
    ident = protocol.Identity(mac=bytes.fromhex("10e2d5000001"), ip=0x7F000001, ctl_port=7000, sys_clk_hz=125_000_000,
                              eth_dw=8, nchannels=4, sample_bits=16, max_payload=1472, capabilities=0x3,
                              board="sim", build_id="0123456789ab", ident="ethdaq sim test")

    def answer(req):
        assert req == protocol.identify_request(seq_of(req))
        return protocol.pack_identify_response(seq_of(req), ident)
    board = ScriptedBoard([answer] * 3, addr=("0.0.0.0", 0))
    try:
        r = run("discover", "--broadcast", "127.255.255.255", "--port", str(board.port), "--timeout", "1.5")
    finally:
        board.close()
    assert r.returncode == 0, r.stderr
    assert len(board.seen) == 3
    assert [line.split() for line in r.stdout.splitlines()] == [
        ["ip", "mac", "board", "build", "control"],
        ["127.0.0.1", "10:e2:d5:00:00:01", "sim", "0123456789ab", "udp/7000"]]
    r = run("discover", "--broadcast", "127.255.255.255", "--port", "9", "--timeout", "0.3")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr == "no board answered IDENTIFY at 127.255.255.255:9 within 0.3 s\n"


@requires_root
@pytest.mark.network
def test_ctl_to_a_board_the_pc_has_no_route_to_is_one_line_that_says_what_to_check():
    ns = "ethdaq-noroute"   # A namespace with only its loopback down: no route anywhere.
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        r = subprocess.run(["ip", "netns", "exec", ns, *ethdaq_cmd("ctl", "status", "--ip", "10.99.0.1",
                                                                  "--timeout", "0.2")],
                           capture_output=True, text=True, timeout=60)
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=True)
    assert "Traceback" not in r.stderr
    assert_one_line_error(r, "cannot send to 10.99.0.1:7000: Network is unreachable (does this PC have an "
                             "address on the board's subnet?")


def test_ctl_action_help_shows_the_common_options_and_only_that_actions_own():
    helps = {}
    for action in ("start", "emulator", "claim", "launch", "reboot", "status"):
        r = run("ctl", action, "--help")
        assert r.returncode == 0 and r.stderr == "", r.stderr
        assert r.stdout.startswith(f"usage: ethdaq ctl {action} [-h] --ip ADDR"), r.stdout[:200]
        assert "--timeout" in r.stdout and "--json" in r.stdout
        helps[action] = r.stdout   # With its examples, which name only its own options.
    own = {"start": "--payload", "emulator": "--rate", "claim": "--lease", "launch": "--to-mac", "reboot": "--no-wait"}
    for action, text in helps.items():
        for other, option in own.items():
            assert (option in text) == (action == other), (action, option)
    assert "NAME=VALUE" not in helps["start"] and "NAME=VALUE" in run("ctl", "config", "-h").stdout
    # Without an action: every action with its line of help, where the options go, the examples.
    whole = run("ctl", "--help").stdout
    assert all(re.search(rf"^    {name} +{re.escape(a.help[:30])}", whole, re.M)
               for name, a in cli.ctl.ACTIONS.items())
    assert "ethdaq ctl ACTION --help" in " ".join(whole.split()) and "\nexamples:\n" in whole
