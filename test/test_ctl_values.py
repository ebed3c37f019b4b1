"""The values users type into `ethdaq ctl` and `ethdaq sim`: every number outside what the
control protocol takes is a one-line usage error before anything is sent; the emulator's rate is a
fraction of the clock everywhere, with one default; a rate the link cannot carry draws a warning
with its arithmetic."""

import dataclasses
import json
import re
import struct

import pytest

from ethdaq.host import linkbudget
from ethdaq.soc import cli
from ethdaq.wire import daqformat, protocol
from test_cli import assert_one_line_error, run
from test_ctl_client import ScriptedBoard, seq_of

# Each action's subparser, and every option any of them takes.
ACTION_PARSERS = cli.make_parser()._subparsers._group_actions[0].choices["ctl"]._subcommands.choices
ACTIONS = list(ACTION_PARSERS)
CTL_OPTIONS = {a.option_strings[0]: a for p in ACTION_PARSERS.values() for a in p._actions if a.option_strings}

# Each numeric option of `ethdaq ctl`, with values outside what it takes: negative, too large,
# not a number.
OUT_OF_RANGE = {
    "--payload": ["-1", "0", "63", "65536", "100000", "many"],
    "--enable": ["-1", "0", "256", "0x100", "x"],
    "--backpressure": ["-1", "256"],
    "--gap": ["-1", str(2**32)],
    "--rate": ["-1", "-0.001", "1.5", "2", "nan", "inf", "fast"],
    "--seed": ["-1", str(2**32)],
    "--lease": ["-1", "3601"],
    "--count": ["-1", str(2**32)],
    "--guard": ["-1", "65536"],
    "--port": ["0", "-5", "65536"],
    "--from-port": ["0", "70000"],
    "--dst-port": ["0", "65536"],
    "--timeout": ["0", "-1", "nan", "inf", "soon"],
    "--wait": ["0", "-3"],
}


def test_every_numeric_ctl_option_has_out_of_range_values_here():
    """A numeric option added to `ethdaq ctl` must be listed above (and so tested below)."""
    numeric = {option for option, a in CTL_OPTIONS.items()
               if a.type is not None and option not in ("--ip", "--dst-ip", "--dst-mac", "--flush", "--in", "--period")}
    assert numeric == set(OUT_OF_RANGE)


def cli_error(capsys, *argv):
    """`ethdaq ARGV` in this process: (exit status, stderr). An exception other than the parser's
    exit fails the test, as a traceback would."""
    try:
        status = cli.main(list(argv))
    except SystemExit as e:
        status = e.code
    return status, capsys.readouterr().err


@pytest.mark.parametrize("action", ACTIONS)
def test_every_ctl_action_refuses_every_out_of_range_value_in_one_line_before_sending(action, capsys):
    # Port 9 on loopback, nobody listening: had anything been sent, the error would be a timeout.
    words = {"config": ["set", "payload=1024"], "rules": ["set", "1", "action=drop", "port=9100"]}.get(action, [])
    for option, values in OUT_OF_RANGE.items():
        for value in values:
            argv = ["ctl", action, *words, f"{option}={value}", "--ip", "127.0.0.1"]
            argv += [] if option == "--port" else ["--port", "9"]
            argv += [] if option == "--timeout" else ["--timeout", "0.2"]
            status, err = cli_error(capsys, *argv)
            assert status == 2 and len(err.splitlines()) == 1 and err.startswith("Error: "), (option, value, err)
            assert repr(value) in err and "no answer" not in err, (option, value, err)


@pytest.mark.parametrize("field", [n for n in protocol.CONFIG_FIELDS
                                   if n not in ("ip", "mac", "dst_ip", "dst_mac", "flush", "netmask", "gateway")
                                   + protocol.CONFIG_FIXED])
def test_config_set_refuses_each_number_outside_its_fields_wire_range(field):
    if field == "emulator_rate":
        bad = ["-1", "1.01", "4294967295"]
    else:
        code = protocol.struct_codes(protocol.CONFIG)[protocol.CONFIG_FIELDS.index(field)]
        lo, hi = protocol.field_range(field)
        width = 8 * struct.calcsize(code)   # Independent of the table's own ranges.
        assert -2**width < lo <= hi < 2**width
        bad = [str(lo - 1), str(hi + 1)]
    for value in bad:
        r = run("ctl", "config", "set", f"{field}={value}", "--ip", "127.0.0.1", "--port", "9", "--timeout", "0.2")
        assert "Traceback" not in r.stderr
        assert_one_line_error(r, field)


def test_field_ranges_come_from_the_wire_formats_and_the_protocols_limits():
    assert protocol.field_range("payload") == (protocol.MIN_PAYLOAD, 2**16 - 1)
    assert protocol.field_range("enable") == (1, 255)
    assert protocol.field_range("emulator_mode") == (0, 3)
    assert protocol.field_range("ptp_log_sync") == (protocol.PTP_LOG_MIN, protocol.PTP_LOG_MAX)
    assert protocol.field_range("ptp_priority1") == (0, 255)
    # STREAM_START and EMULATOR carry the same fields as CONFIG, at the same widths.
    codes = dict(zip(protocol.CONFIG_FIELDS, protocol.struct_codes(protocol.CONFIG)))
    assert protocol.struct_codes(protocol.STREAM_START) == [codes[n] for n in protocol.STREAM_START_FIELDS]
    assert protocol.struct_codes(protocol.EMULATOR) == [codes[n] for n in protocol.EMULATOR_FIELDS]
    for name, code in codes.items():
        if name not in protocol.FIELD_LIMITS and not code.endswith("s"):
            lo, hi = protocol.field_range(name)
            struct.pack(">" + code, lo), struct.pack(">" + code, hi)     # In range for struct...
            for outside in (lo - 1, hi + 1):
                with pytest.raises(struct.error):                        # ... and nothing beyond.
                    struct.pack(">" + code, outside)


@pytest.mark.parametrize("args, text", [
    (["--stream", "3", "--payload", "100000"], "payload must be an integer from 64 to 65535, not '100000'"),
    (["--stream", "3", "--payload", "9000"], "--payload must be from 64 to 8954 (the simulated board's max payload)"),
    (["--stream-rate", "-1"], "emulator rate must be a fraction from 0 to 1"),
    (["--stream-rate", "2"], "emulator rate must be a fraction from 0 to 1"),
    (["--ping", "-2"], "--ping must be 0 or a positive integer, not '-2'"),
    (["--stream", "-1"], "--stream must be 0 or a positive number, not '-1'"),
    (["--boot-timeout", "0"], "--boot-timeout must be a positive number"),
])
def test_sim_refuses_out_of_range_values_before_anything_else(args, text):
    """Before the root check, the namespace and the build: one line, exit 2."""
    r = run("sim", *args, "--netns", "ethdaq-values-test")
    assert "Traceback" not in r.stderr
    assert_one_line_error(r, text)


def test_sim_warns_with_the_arithmetic_when_the_stream_exceeds_the_link(monkeypatch, capsys):
    from ethdaq.soc import sim
    monkeypatch.setattr(sim, "check_can_run", lambda netns: (_ for _ in ()).throw(sim.SimError("stop here")))
    assert cli.main(["sim", "--stream", "3", "--stream-rate", "0.25", "--netns", "ethdaq-values-test"]) == 2
    err = capsys.readouterr().err
    # 4 channels x 2 bytes x 0.25 x 125 MHz = 250 MB/s of samples, against 125 MB/s.
    assert "4 channels x 2 bytes x 0.25 samples/cycle x 125 MHz = 250.0 MB/s of samples" in err
    assert "but the link carries 125.0 MB/s (1000 Mb/s)" in err
    assert cli.main(["sim", "--stream", "3", "--netns", "ethdaq-values-test"]) == 2
    assert "warning" not in capsys.readouterr().err


# The emulator's rate: one default, fractions in and out ----------------------------------------

def test_one_emulator_rate_default_in_the_cli_the_sim_and_the_boards_firmware():
    parser = cli.make_parser()
    assert parser.parse_args(["ctl", "emulator", "--ip", "10.0.0.1"]).rate == protocol.EMULATOR_RATE_DEFAULT
    assert parser.parse_args(["sim"]).stream_rate == protocol.EMULATOR_RATE_DEFAULT
    fixed = protocol.emulator_rate_fixed(protocol.EMULATOR_RATE_DEFAULT)
    assert f"#define CTL_EMULATOR_RATE_DEFAULT {fixed}u" in protocol.c_header()
    from pathlib import Path
    main_c = (Path(__file__).parent.parent / "software" / "firmware" / "main.c").read_text()
    assert re.search(r"emulator\.rate\s*=\s*CTL_EMULATOR_RATE_DEFAULT;", main_c)


def test_the_default_rate_fits_every_boards_link_with_all_four_16_bit_channels():
    from ethdaq.boards import BOARDS
    for board in BOARDS.values():
        mbps = {"100M": 100, "1G": 1000, "10G": 10000}[board.link]
        b = linkbudget.Budget(4, 16, protocol.EMULATOR_RATE_DEFAULT, board.sys_clk_freq, 1472, mbps)
        assert b.fits, (board.name, b.arithmetic())


def test_the_emulator_rate_is_set_and_shown_as_the_fraction_users_type():
    assert protocol.parse_config_assignment("emulator_rate=0.1") == ("emulator_rate", 429496730)   # 0.1 x 2^32
    assert protocol.parse_config_assignment("emulator_rate=1") == ("emulator_rate", 2**32 - 1)
    assert protocol.parse_config_assignment("emulator_rate=0") == ("emulator_rate", 0)
    with pytest.raises(ValueError, match="emulator_rate must be a fraction from 0 to 1"):
        protocol.parse_config_assignment("emulator_rate=2147483648")
    values = dict(zip(protocol.CONFIG_FIELDS, [0, bytes(6), 0, 5000, 1472, 15, 0, 0, bytes(6), 0, 1,
                                               429496730, 1, 0, 0, 0, 0, 1, 0, 128, 128, 0xFFFFFF00, 0]))
    cfg = protocol.parse_response(protocol.pack_header(protocol.MSG_CONFIG_GET | protocol.RESPONSE, 1) +
                                  protocol.CONFIG.pack(*values.values()))[2]
    assert protocol.format_config(cfg)["emulator_rate"] == 0.1
    values["emulator_rate"] = 2**31
    cfg = protocol.parse_response(protocol.pack_header(protocol.MSG_CONFIG_GET | protocol.RESPONSE, 1) +
                                  protocol.CONFIG.pack(*values.values()))[2]
    assert protocol.format_config(cfg)["emulator_rate"] == 0.5
    assert (protocol.format_config(cfg)["netmask"], protocol.format_config(cfg)["gateway"]) == ("255.255.255.0", "none")
    values["gateway"] = 0xC0A801FE
    cfg = protocol.parse_response(protocol.pack_header(protocol.MSG_CONFIG_GET | protocol.RESPONSE, 1) +
                                  protocol.CONFIG.pack(*values.values()))[2]
    assert protocol.format_config(cfg)["gateway"] == "192.168.1.254"


def test_the_netmask_and_gateway_are_set_as_users_write_them():
    assert protocol.parse_config_assignment("netmask=24") == ("netmask", 0xFFFFFF00)
    assert protocol.parse_config_assignment("netmask=/20") == ("netmask", 0xFFFFF000)
    assert protocol.parse_config_assignment("netmask=255.255.0.0") == ("netmask", 0xFFFF0000)
    with pytest.raises(ValueError, match=r"netmask must be a prefix length 0..32 like 24 \(or /24\) or a mask like "
                                         r"255.255.255.0, not '255.0.255.0'"):
        protocol.parse_config_assignment("netmask=255.0.255.0")
    assert protocol.parse_config_assignment("gateway=192.168.1.254") == ("gateway", 0xC0A801FE)
    assert protocol.parse_config_assignment("gateway=0.0.0.0") == ("gateway", 0)
    with pytest.raises(ValueError, match=r"gateway must be dotted IPv4 like 192.168.1.254 \(0.0.0.0: none\), not 'router'"):
        protocol.parse_config_assignment("gateway=router")


# The link budget -----------------------------------------------------------------------------

def test_the_link_budget_counts_headers_and_the_wire_overhead():
    # 1472-byte payload, 16-bit samples: 716 samples (1432 bytes) in 1472 + 66 = 1538 wire bytes.
    b = linkbudget.Budget(4, 16, 0.1, 125e6, 1472, 1000)
    assert b.samples_per_datagram == (1472 - daqformat.HEADER_LEN) // 2 == 716
    assert b.sample_bytes_per_s == pytest.approx(4 * 2 * 0.1 * 125e6)
    assert b.wire_bytes_per_s == pytest.approx(100e6 / 1432 * 1538)
    assert b.fits and b.max_rate == pytest.approx(0.1 * 125e6 / (100e6 / 1432 * 1538))
    assert not linkbudget.Budget(4, 16, 0.25, 125e6, 1472, 1000).fits        # The README's old example.
    assert not linkbudget.Budget(4, 16, 0.01, 100e6, 1472, 10).fits


IDENTITY = protocol.Identity(mac=bytes.fromhex("10e2d5000001"), ip=0x7F000001, ctl_port=7000, sys_clk_hz=125_000_000,
                            eth_dw=8, nchannels=4, sample_bits=16, max_payload=8954,
                            capabilities=protocol.CAP_STREAMER, board="sim", build_id="0123", ident="test")


def identify_answer(req):
    assert req[3] == protocol.MSG_IDENTIFY
    return protocol.pack_identify_response(seq_of(req), IDENTITY)


def fake_board(requests, link_speed=1000, emulator_mode=1, emulator_rate=2**30, payload=1472, enable=0xF,
               start_error=None, running=0, run=0, ptp=False, start_refusal=None, ident=IDENTITY,
               addr=("127.0.0.1", 0)):
    """A board on loopback answering IDENTIFY (`ident`), CONFIG_GET, STATUS (run `run`), EMULATOR,
    STREAM_START (run 7), STREAM_STOP (run 7), CLAIM (granted), RELEASE and, if `ptp`, PTP_STATUS
    (every field 0). start_error refuses STREAM_START with that code, and with the reason
    start_refusal (a protocol.Refusal) if given. It listens on `addr`."""
    config = [0, bytes(6), 0, 5000, payload, enable, 0, 0, bytes(6), 0, emulator_mode, emulator_rate, 1,
              0, 0, 0, 0, 1, 0, 128, 128, 0xFFFFFF00, 0]
    status = [0] * len(protocol.struct_codes(protocol.STATUS_RSP))
    status[10], status[9], status[22], status[0], status[1] = bytes(6), protocol.DST_VALID, link_speed, running, run
    codes = protocol.struct_codes(protocol.PTP_STATUS_RSP)
    ptp_status = [bytes(int(c[:-1])) if c.endswith("s") else 0 for c in codes]

    def answer(req):
        kind, seq = req[3], seq_of(req)
        head = protocol.pack_header(kind | protocol.RESPONSE, seq)
        if kind == protocol.MSG_IDENTIFY:
            return protocol.pack_identify_response(seq, ident)
        if kind == protocol.MSG_CONFIG_GET:
            return head + protocol.CONFIG.pack(*config)
        if kind == protocol.MSG_STATUS:
            return head + protocol.STATUS_RSP.pack(*status)
        if kind == protocol.MSG_PTP_STATUS and ptp:
            return head + protocol.PTP_STATUS_RSP.pack(*ptp_status)
        if kind == protocol.MSG_STREAM_START and start_error:
            return protocol.pack_error_response(seq, start_error, start_refusal)
        if kind == protocol.MSG_STREAM_START:
            return head + protocol.STREAM_START_RSP.pack(7, 0x7F000001)
        if kind == protocol.MSG_STREAM_STOP:
            return head + protocol.STREAM_STOP_RSP.pack(7)
        if kind == protocol.MSG_CLAIM:
            return head + protocol.CLAIM_RSP.pack(1, 0x7F000001, 60_000)
        return head
    return ScriptedBoard([answer] * requests, addr)


def test_ctl_emulator_warns_with_the_arithmetic_when_the_link_cannot_carry_the_rate():
    board = fake_board(4, link_speed=1000)
    try:
        r = run("ctl", "emulator", "--rate", "0.25", "--ip", "127.0.0.1", "--port", str(board.port))
    finally:
        board.close()
    assert r.returncode == 0, r.stderr
    assert r.stdout == "emulator: counter, 0.25 samples/cycle per channel\n"
    (line,) = r.stderr.splitlines()
    assert line.startswith("warning: the board will drop samples: 4 channels x 2 bytes x 0.25 samples/cycle x "
                           "125 MHz = 250.0 MB/s of samples, 268.5 MB/s on the wire at 1472-byte payloads, but "
                           "the link carries 125.0 MB/s (1000 Mb/s)")
    sent = [req for req in board.seen if req[3] == protocol.MSG_EMULATOR]
    assert [protocol.EMULATOR.unpack_from(req, protocol.HEADER.size) for req in sent] == [(1, 2**30, 1)]


def test_ctl_emulator_within_the_link_draws_no_warning_and_a_slow_link_does():
    for speed, warned in ((1000, False), (10, True)):
        board = fake_board(4, link_speed=speed)
        try:
            r = run("ctl", "emulator", "--ip", "127.0.0.1", "--port", str(board.port))
        finally:
            board.close()
        assert r.returncode == 0 and ("warning: the board will drop samples" in r.stderr) == warned, r.stderr


def test_ctl_start_warns_for_the_boards_emulator_rate_and_refuses_a_payload_past_the_boards():
    board = fake_board(5, emulator_rate=2**31)
    try:
        r = run("ctl", "start", "--ip", "127.0.0.1", "--port", str(board.port))
    finally:
        board.close()
    assert r.returncode == 0, r.stderr
    assert "run 7 started" in r.stdout and "4 channels x 2 bytes x 0.5 samples/cycle" in r.stderr
    board = fake_board(4)
    try:
        r = run("ctl", "start", "--payload", "9000", "--ip", "127.0.0.1", "--port", str(board.port))
        r2 = run("ctl", "start", "--enable", "99", "--ip", "127.0.0.1", "--port", str(board.port))
    finally:
        board.close()
    assert_one_line_error(r, "--payload: payload must be from 64 to 8954 on this board (4 channels, max payload 8954), "
                             "not 9000")
    assert_one_line_error(r2, "--enable: enable must be from 0x1 to 0xf on this board")
    assert not [req for req in board.seen if req[3] == protocol.MSG_STREAM_START]


# A front-end board: channels 0 and 2 declare 40 and 10 Msamples/s, channel 1 nothing, channel 3
# 1 Msamples/s; its emulators are off.
FRONTEND = dataclasses.replace(IDENTITY, capabilities=protocol.CAP_STREAMER | protocol.CAP_FRONTEND,
                               max_rates=(40_000_000, 0, 10_000_000, 1_000_000))


def start_on_frontend_board(*options):
    board = fake_board(6, emulator_mode=0, ident=FRONTEND)   # With --enable and --payload: IDENTIFY twice.
    try:
        return run("ctl", "start", *options, "--ip", "127.0.0.1", "--port", str(board.port))
    finally:
        board.close()


def test_ctl_start_warns_when_the_enabled_channels_declared_rates_exceed_the_link_at_the_payload():
    # Channels 0 and 2: 50 Msamples/s of 2 bytes, 100 MB/s. At 200-byte payloads a datagram holds
    # (200 - 40) / 2 = 80 samples and costs 200 + 66 bytes on the wire: 100e6 / 160 x 266.
    r = start_on_frontend_board("--enable", "0x5", "--payload", "200")
    assert r.returncode == 0 and "run 7 started" in r.stdout, r.stderr
    wire = 100e6 / 160 * (200 + 66)
    assert daqformat.HEADER_LEN == 40 and wire > 125e6
    (line,) = r.stderr.splitlines()
    assert line.startswith(f"warning: the board will drop samples when the front-end makes what it declares as its "
                           f"worst case: (40 + 10) Msamples/s x 2 bytes = 100.0 MB/s of samples, {wire / 1e6:.1f} MB/s "
                           f"on the wire at 200-byte payloads, but the link carries 125.0 MB/s (1000 Mb/s); "
                           f"up to {50 * 125e6 / wire:.4g} Msamples/s in all fit at this payload"), line
    # The same channels fit at 1472-byte payloads: 100e6 / 1432 x 1538 = 107.4 MB/s.
    r = start_on_frontend_board("--enable", "0x5", "--payload", "1472")
    assert r.returncode == 0 and r.stderr == "", r.stderr


def test_undeclared_channels_are_named_and_not_counted_and_alone_draw_no_warning():
    r = start_on_frontend_board("--enable", "0x7", "--payload", "200")
    assert r.returncode == 0 and "(40 + 10) Msamples/s x 2 bytes" in r.stderr, r.stderr
    assert r.stderr.rstrip().endswith("; not counted: channel 1, with no declared rate"), r.stderr
    r = start_on_frontend_board("--enable", "0x2", "--payload", "64")   # Only channel 1: unknown.
    assert r.returncode == 0 and r.stderr == "", r.stderr
    r = start_on_frontend_board("--enable", "0x8", "--payload", "64")   # 1 Msamples/s fits even at 64 bytes.
    assert r.returncode == 0 and r.stderr == "", r.stderr


def test_ctl_identify_shows_the_declared_rates():
    board = fake_board(2, ident=FRONTEND)
    try:
        r = run("ctl", "identify", "--ip", "127.0.0.1", "--port", str(board.port))
        rj = run("ctl", "identify", "--json", "--ip", "127.0.0.1", "--port", str(board.port))
    finally:
        board.close()
    assert ("max rates     channel 0 40 Msamples/s, channel 1 undeclared, channel 2 10 Msamples/s, "
            "channel 3 1 Msamples/s\n") in r.stdout, r.stdout
    assert json.loads(rj.stdout)["max_rates"] == [40_000_000, 0, 10_000_000, 1_000_000]
    undeclared, emulators = fake_board(1, ident=dataclasses.replace(FRONTEND, max_rates=())), fake_board(1)
    try:
        r = run("ctl", "identify", "--ip", "127.0.0.1", "--port", str(undeclared.port))
        plain = run("ctl", "identify", "--ip", "127.0.0.1", "--port", str(emulators.port))
    finally:
        undeclared.close()
        emulators.close()
    assert "max rates     undeclared by the front-end (ctl start cannot check it against the link)\n" in r.stdout
    assert plain.returncode == 0 and "max rates" not in plain.stdout, plain.stdout


def test_readme_and_help_examples_stay_within_the_link():
    from pathlib import Path
    root = Path(__file__).parent.parent
    texts = (root / "README.md").read_text() + run("ctl", "--help").stdout + run("sim", "--help").stdout
    rates = [float(m) for m in re.findall(r"--(?:stream-)?rate[ =]([0-9.]+)", texts)]
    assert rates, "the examples show a rate"
    for rate in rates:
        assert linkbudget.Budget(4, 16, rate, 125e6, 1472, 1000).fits, rate


def test_config_set_of_a_payload_or_mask_past_the_board_names_the_boards_range_and_sends_nothing():
    board = ScriptedBoard([identify_answer] * 2)
    try:
        r = run("ctl", "config", "set", "payload=9000", "--ip", "127.0.0.1", "--port", str(board.port))
        r2 = run("ctl", "config", "set", "enable=0x10", "--ip", "127.0.0.1", "--port", str(board.port))
    finally:
        board.close()
    assert_one_line_error(r, "payload must be from 64 to 8954 on this board (4 channels, max payload 8954), not 9000")
    assert_one_line_error(r2, "enable must be from 0x1 to 0xf on this board (4 channels, max payload 8954), not 0x10")
    assert [req[3] for req in board.seen] == [protocol.MSG_IDENTIFY] * 2


def test_a_boards_refusal_with_a_reason_is_the_one_line_it_says():
    refusal = protocol.Refusal(protocol.REFUSAL_FIELD_CODES["payload"], 1472, protocol.MIN_PAYLOAD, 1400)
    board = fake_board(3, start_error=protocol.ERR_BAD_VALUE, start_refusal=refusal)
    try:
        r = run("ctl", "start", "--ip", "127.0.0.1", "--port", str(board.port))
    finally:
        board.close()
    assert_one_line_error(r, "board refused the request: payload 1472 out of range 64..1400")


def test_a_boards_value_refusal_names_the_fields_and_the_ranges_it_takes():
    board = fake_board(3, start_error=protocol.ERR_BAD_VALUE)
    try:
        r = run("ctl", "start", "--dst-ip", "255.255.255.255", "--ip", "127.0.0.1", "--port", str(board.port))
    finally:
        board.close()
    assert_one_line_error(r, "board refused the request: value out of range: this board takes dst_port 1..65535, "
                             "payload 64..8954, enable 0x1..0xf, backpressure 0x0..0xf, flush 0 (off) or 1us..1s")


def test_ctl_identify_shows_the_event_channels():
    board = fake_board(2, ident=dataclasses.replace(FRONTEND, event_id_bits=(0, 12, 0, 31)))
    plain = fake_board(1, ident=FRONTEND)
    try:
        r = run("ctl", "identify", "--ip", "127.0.0.1", "--port", str(board.port))
        rj = run("ctl", "identify", "--json", "--ip", "127.0.0.1", "--port", str(board.port))
        samples = run("ctl", "identify", "--ip", "127.0.0.1", "--port", str(plain.port))
    finally:
        board.close()
        plain.close()
    assert "events        channel 1: 12-bit ids, channel 3: 31-bit ids (published as ev44)\n" in r.stdout, r.stdout
    assert json.loads(rj.stdout)["event_id_bits"] == [0, 12, 0, 31]
    assert samples.returncode == 0 and "events" not in samples.stdout, samples.stdout
