"""`ethdaq ioc` without a board: the PV table (names, EPICS field limits, the docs' table), the
values of a poll as PVs (rates, enums, values a build lacks), --board and --prefix, the setpoints'
values as the protocol takes them; and softioc stays unimported until the IOC runs."""

import argparse
import json
import re
import subprocess
import sys

import pytest

from conftest import REPO
from ethdaq.host import csrmap, ioc
from ethdaq.wire import protocol


def poll(datagrams=100, s0=(0, 10, 14720, 3), rx=None):
    """A boardmetrics.poll(client, settings=True) of a 2-stream board, as plain values."""
    return dict(info=dict(board_name="sim", build_id="abc123", ident="ethdaq sim abc123", mac="10:e2:d5:00:00:77",
                          channels="2", sample_bits="16"),
                status=dict(running=1, run=3, datagrams=datagrams, dropped=5, boots=0, uptime_ms=12345,
                            link_speed=1000, controller_ip=0xC0A84D01, lease_ms=42_500,
                            **{name: i for i, name in enumerate(ioc.STATUS_COUNTERS)}),
                link_up=True,
                streams=[s0, (1, 20, 29440, 0)],
                ptp=dict(state="MASTER", servo="locked", offset_ns=-12, delay_ns=340, freq_ppb=1.5,
                         **{name: 7 for name in ioc.PTP_COUNTERS}),
                rx=rx if rx is not None else {"rx_ok": 1000, "fcs": 2},
                config=dict(payload=1024, enable=3, dst_ip=0, dst_port=5000, emulator_mode=2,
                            emulator_rate=protocol.emulator_rate_fixed(0.01), ptp_role=2))


def test_pv_names_are_unique_and_fit_epics_fields():
    pvs = ioc.board_pvs()
    assert len({pv.name for pv in pvs}) == len(pvs)
    for pv in pvs:
        assert re.fullmatch(r"[A-Z0-9_]+(:[A-Z0-9_]+)+", pv.name), pv.name
        assert 0 < len(pv.desc) <= ioc.DESC_MAX and len(pv.egu) <= ioc.EGU_MAX, pv
        assert pv.kind in ("int", "float", "bool", "enum", "str", "text"), pv
        assert len(pv.states) <= 16 and all(len(s) < 26 for s in pv.states), pv   # mbbi: 16 states of 25 chars
    assert {pv.name for pv in pvs if pv.write} == {"RUN:CTRL", "CFG:PAYLOAD", "CFG:ENABLE", "CFG:DST_IP",
                                                   "CFG:DST_PORT", "EMU:MODE", "EMU:RATE", "PTP:ROLE", "CTL:CLAIM"}


def test_the_docs_table_lists_every_pv_with_its_type_and_unit():
    text = (REPO / "docs" / "epics.md").read_text()
    rows = re.findall(r"^\| `([A-Z0-9_:{}n]+)` \| (\w+) \| ([^|]*) \| ([^|]*) \| (read|write) \|$", text, re.M)
    documented = {}
    for name, kind, unit, _, access in rows:
        for expanded in ([name.replace("S{n}", f"S{i}") for i in range(protocol.MAX_STREAMS)] if "S{n}" in name
                         else [name]):
            documented[expanded] = (kind, unit.strip().strip("`"), access)
    table = {pv.name: (pv.kind, pv.egu, "write" if pv.write else "read") for pv in ioc.board_pvs()
             if not pv.name.startswith(("RX:", "STAT:", "PTP:")) or pv.name in documented}
    assert {n: documented.get(n) for n in table} == table
    # The receive, STATUS and PTP counters are listed by name.
    for pv in ioc.board_pvs():
        if pv.name not in documented:
            assert f"`{pv.name.split(':', 1)[1]}`" in text, pv.name


def test_a_poll_becomes_the_pvs_values():
    v = ioc.values(poll())
    assert set(v) == set(ioc.POLLED)     # Every read PV but the IOC's own (COMM:, CTL:MSG, CTL:WRITE_ERRORS).
    assert v["ID:BOARD"] == "sim" and v["ID:CHANNELS"] == 2 and v["ID:MAC"] == "10:e2:d5:00:00:77"
    assert v["STAT:UPTIME"] == 12.345 and v["RUN:RUNNING"] == 1 and v["RUN:NUMBER"] == 3 and v["RUN:DROPPED"] == 5
    assert v["LINK:UP"] == 1 and v["LINK:SPEED"] == 1000
    assert v["CTL:CONTROLLER"] == "192.168.77.1" and v["CTL:LEASE"] == 42.5
    assert v["STAT:CTL_REQUESTS"] == ioc.STATUS_COUNTERS.index("ctl_requests")
    assert ioc.PTP_STATE_NAMES[v["PTP:STATE"]] == "MASTER" and ioc.SERVO_NAMES[v["PTP:SERVO"]] == "locked"
    assert (v["PTP:OFFSET"], v["PTP:DELAY"], v["PTP:FREQ"], v["PTP:STEPS"]) == (-12, 340, 1.5, 7)
    assert (v["CFG:PAYLOAD_RBV"], v["CFG:ENABLE_RBV"], v["CFG:DST_IP_RBV"], v["CFG:DST_PORT_RBV"]) == (1024, 3, "", 5000)
    assert ioc.EMULATOR_NAMES[v["EMU:MODE_RBV"]] == "ramp" and ioc.ROLE_NAMES[v["PTP:ROLE_RBV"]] == "slave"
    assert v["EMU:RATE_RBV"] == pytest.approx(0.01)
    assert (v["S0:DATAGRAMS"], v["S0:BYTES"], v["S0:DROPPED"]) == (10, 14720, 3)
    # What the build lacks: streams past its two, receive counters it does not answer.
    assert all(v[f"S{i}:{f}"] is None for i in range(2, protocol.MAX_STREAMS) for f in ("DATAGRAMS", "BYTES", "DROPPED"))
    assert v["RX:RX_OK"] == 1000 and v["RX:FCS"] == 2 and v["RX:PTP_LENGTH"] is None
    # Rates need an earlier poll.
    assert v["RUN:DATAGRAM_RATE"] is None and v["S0:DATAGRAM_RATE"] is None


def test_rates_are_per_second_between_two_polls_and_a_new_run_counts_from_zero():
    earlier = poll(datagrams=100, s0=(0, 10, 14720, 0))
    v = ioc.values(poll(datagrams=300, s0=(0, 30, 44160, 0)), earlier, 2.0)
    assert v["RUN:DATAGRAM_RATE"] == 100 and v["S0:DATAGRAM_RATE"] == 10 and v["S0:BYTE_RATE"] == 14720
    assert v["S1:DATAGRAM_RATE"] == 0 and v["S2:DATAGRAM_RATE"] is None
    v = ioc.values(poll(s0=(0, 4, 5888, 0)), earlier, 2.0)    # A new run: its counters restarted.
    assert v["S0:DATAGRAM_RATE"] == 2 and v["S0:BYTE_RATE"] == 2944
    assert ioc.rate(1, 2, 0) is None and ioc.rate(None, 2, 1) is None


def test_an_unknown_ptp_state_is_no_value():
    p = poll()
    p["ptp"]["state"] = "state 42"
    assert ioc.values(p)["PTP:STATE"] is None


@pytest.mark.parametrize("text, ip, port, name", [("192.168.1.50", "192.168.1.50", 7000, ""),
                                                  ("192.168.1.50:7001", "192.168.1.50", 7001, ""),
                                                  ("10.0.0.2:7001=DAQ-2", "10.0.0.2", 7001, "DAQ-2:"),
                                                  ("10.0.0.2=A", "10.0.0.2", 7000, "A:")])
def test_board_argument(text, ip, port, name):
    b = ioc.board_arg(text)
    assert (b.ip, b.port, b.name) == (ip, port, name)


@pytest.mark.parametrize("text, error", [
    ("board1", "--board must be ADDR[:PORT][=NAME] with ADDR an IPv4 address, not 'board1'"),
    ("10.0.0.2:0", "--board's port must be 1 to 65535, not '0'"),
    ("10.0.0.2:x", "--board's port must be 1 to 65535, not 'x'"),
    ("10.0.0.2=", "--board's NAME must be letters, digits and _-:.;<>[]{}, not ''"),
    ("10.0.0.2=a b", "--board's NAME must be letters, digits and _-:.;<>[]{}, not 'a b'")])
def test_a_wrong_board_argument_is_one_line(text, error):
    with pytest.raises(argparse.ArgumentTypeError) as e:
        ioc.board_arg(text)
    assert str(e.value) == error


def test_several_boards_are_named_and_names_must_differ_and_fit():
    boards = [ioc.board_arg("10.0.0.2"), ioc.board_arg("10.0.0.3=X"), ioc.board_arg("10.0.0.4")]
    ioc.check_boards(boards, "LAB:")
    assert [b.name for b in boards] == ["B1:", "X:", "B3:"]
    one = [ioc.board_arg("10.0.0.2")]
    ioc.check_boards(one, "LAB:")
    assert one[0].name == ""
    with pytest.raises(ioc.IocError, match="two boards are named A: give each --board its own =NAME"):
        ioc.check_boards([ioc.board_arg("10.0.0.2=A"), ioc.board_arg("10.0.0.3=A")], "LAB:")
    with pytest.raises(ioc.IocError, match="PV names of 10.0.0.2 would be up to 8[0-9] characters, EPICS takes 60"):
        ioc.check_boards([ioc.board_arg("10.0.0.2")], "L" * 60 + ":")


def test_setpoints_are_checked_against_the_protocol_and_the_board_checks_the_rest():
    assert ioc.config_value("payload", 1024) == 1024
    assert ioc.config_value("dst_ip", "") == 0 and ioc.config_value("dst_ip", "192.168.1.10") == 0xC0A8010A
    assert ioc.config_value("emulator_rate", 0.5) == protocol.emulator_rate_fixed(0.5)
    with pytest.raises(ValueError, match="payload must be from 64 to 65535, not 10"):
        ioc.config_value("payload", 10)
    with pytest.raises(ValueError, match="dst_ip must be an IPv4 address"):
        ioc.config_value("dst_ip", "host.example")
    with pytest.raises(ValueError):
        ioc.config_value("emulator_rate", 2.0)


def test_ioc_command_is_in_the_cli_and_softioc_is_imported_only_when_it_runs():
    code = ("import sys\nfrom ethdaq.soc import cli\np = cli.make_parser()\n"
            "a = p.parse_args(['ioc', '--board', '192.168.1.50', '--prefix', 'LAB:DAQ1:'])\n"
            "assert a.func.__module__ == 'ethdaq.host.ioc' and a.interval == 1.0, a\n"
            "assert not [m for m in sys.modules if m.startswith(('softioc', 'epics', 'prometheus_client'))]\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_a_key_file_that_cannot_be_read_is_one_line(tmp_path):
    r = subprocess.run([sys.executable, "-m", "ethdaq.soc.cli", "ioc", "--board", "192.168.1.50", "--prefix", "L:",
                        "--key-file", str(tmp_path / "missing")], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr == f"Error: cannot read key file {tmp_path / 'missing'}: No such file or directory\n"


CSR = {"csr_bases": {"frontend": 0xF0001000, "streamer": 0xF0000800}, "csr_registers": {
    "frontend_threshold": {"addr": 0xF0001000, "size": 1, "type": "rw"},
    "frontend_time":      {"addr": 0xF0001008, "size": 2, "type": "ro"},
    "frontend_events":    {"addr": 0xF0001004, "size": 1, "type": "ro"},
    "frontend_pattern":   {"addr": 0xF0001010, "size": 3, "type": "rw"},
    "streamer_enable":    {"addr": 0xF0000800, "size": 1, "type": "rw"}}}


def csr_file(tmp_path, content=CSR, name="csr.json"):
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def test_front_end_registers_become_pvs_with_readbacks_for_the_writable_ones(tmp_path):
    regs = csrmap.frontend_registers(csr_file(tmp_path))
    assert [(r.name, r.offset, r.words, r.writable) for r in regs.values()] == [
        ("threshold", 0, 1, True), ("events", 4, 1, False), ("time", 8, 2, False), ("pattern", 16, 3, True)]
    pvs = {pv.name: pv for pv in ioc.frontend_pvs(regs)}
    assert {name: (pv.kind, bool(pv.write)) for name, pv in pvs.items()} == {
        "FE:THRESHOLD": ("int64", True), "FE:THRESHOLD_RBV": ("int64", False), "FE:EVENTS": ("int64", False),
        "FE:TIME": ("int64", False), "FE:PATTERN": ("text", True), "FE:PATTERN_RBV": ("text", False)}
    for pv in pvs.values():
        assert re.fullmatch(r"[A-Z0-9_]+(:[A-Z0-9_]+)+", pv.name) and 0 < len(pv.desc) <= ioc.DESC_MAX, pv

    class Board:   # REG_READ's words, as the board gives them.
        words = {0: [1500], 4: [7], 8: [0x1, 0x2], 16: [0xA, 0xB, 0xC]}

        def reg_read(self, offset, count):
            assert count == len(self.words[offset])
            return self.words[offset]
    got = ioc.read_registers(Board(), regs)
    assert got == {"FE:THRESHOLD_RBV": 1500, "FE:EVENTS": 7, "FE:TIME": (1 << 32) + 2,
                   "FE:PATTERN_RBV": "0x0000000a0000000b0000000c"}
    assert ioc.values(dict(poll(), registers=got))["FE:TIME"] == (1 << 32) + 2
    Board.words[8] = [0x80000000, 0]   # 2**63 does not fit a signed 64-bit PV: no value (INVALID).
    assert ioc.read_registers(Board(), regs)["FE:TIME"] is None


def test_a_put_to_a_front_end_register_is_one_reg_write_checked_against_its_width(tmp_path):
    regs = csrmap.frontend_registers(csr_file(tmp_path))

    class Board:
        def __init__(self):
            self.writes = []

        def reg_write(self, offset, words):
            self.writes.append((offset, words))
            return words
    b = Board()
    assert ioc.write(b, "register", 1500, regs["threshold"]) == "threshold written (REG_WRITE), reads back 1500"
    assert ioc.write(b, "register", "0x100000002000000030000004", regs["pattern"]).endswith(
        f"reads back {0x100000002000000030000004}")
    assert b.writes == [(0, [1500]), (16, [0x10000000, 0x20000000, 0x30000004])]
    for value, text in ((-1, "threshold holds 32 bits (0 to 4294967295), not -1"),
                        (1 << 32, "threshold holds 32 bits"), ("12x", "threshold takes a number")):
        with pytest.raises(ioc.WriteRefused, match=re.escape(text)):
            ioc.write(b, "register", value, regs["threshold"])
    assert len(b.writes) == 2   # Nothing refused was sent.


def test_csr_files_go_to_their_boards_and_misuse_is_one_line(tmp_path):
    good = csr_file(tmp_path)
    other = csr_file(tmp_path, dict(CSR, csr_registers={"frontend_gain": {"addr": 0xF0001000, "size": 1,
                                                                           "type": "rw"}}), "other.json")
    boards = [ioc.board_arg("10.0.0.2=A"), ioc.board_arg("10.0.0.3=B"), ioc.board_arg("10.0.0.4=C")]
    ioc.assign_csr(boards, [str(good), f"B={other}"])
    assert [list(b.registers) for b in boards] == [["threshold", "events", "time", "pattern"], ["gain"],
                                                   ["threshold", "events", "time", "pattern"]]
    one = [ioc.board_arg("10.0.0.2")]
    ioc.assign_csr(one, [str(other)])
    assert list(one[0].registers) == ["gain"]
    for csrs, text in (([f"D={good}"], "--csr D=" + str(good) + ": no --board is named 'D' (the boards: A, B, C)"),
                       ([str(good), str(other)], "a second --csr without NAME="),
                       ([f"A={good}", f"A={other}"], "a second --csr for the board A"),
                       ([str(tmp_path / "none.json")], f"--csr: {tmp_path / 'none.json'}: not found"),
                       ([str(csr_file(tmp_path, "{", "bad.json"))], "not a build's csr.json"),
                       ([str(csr_file(tmp_path, {"csr_bases": {"streamer": 0}, "csr_registers": {}}, "plain.json"))],
                        "its build has no front-end registers (only streamer); was the board built with --frontend?")):
        with pytest.raises(ioc.IocError, match=re.escape(text)):
            ioc.assign_csr([ioc.board_arg("10.0.0.2=A"), ioc.board_arg("10.0.0.3=B"), ioc.board_arg("10.0.0.4=C")],
                           csrs)
    long = [ioc.board_arg("10.0.0.2")]
    ioc.assign_csr(long, [str(csr_file(tmp_path, dict(CSR, csr_registers={"frontend_" + "x" * 50: {
        "addr": 0xF0001000, "size": 1, "type": "rw"}}), "long.json"))])
    with pytest.raises(ioc.IocError, match="PV names of 10.0.0.2 would be up to 6[0-9] characters"):
        ioc.check_boards(long, "LAB:DAQ1:")


def test_a_wrong_csr_file_stops_the_ioc_with_one_line(tmp_path):
    r = subprocess.run([sys.executable, "-m", "ethdaq.soc.cli", "ioc", "--board", "192.168.1.50", "--prefix", "L:",
                        "--csr", str(tmp_path / "missing.json")], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr == (f"Error: --csr: {tmp_path / 'missing.json'}: not found "
                                              "(the build directory's csr.json)\n"), r.stderr
