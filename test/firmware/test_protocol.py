"""Control protocol: the firmware's C parser (built for the host, with sanitizers) against the
Python definition in ethdaq.wire.protocol, byte for byte, plus malformed and random input."""

import dataclasses
import random
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from ethdaq.wire import protocol

IDENTITY = protocol.Identity(mac=bytes([0x10, 0xe2, 0xd5, 0, 0, 1]), ip=0xC0A80132, ctl_port=7000,
    sys_clk_hz=125_000_000, eth_dw=8, nchannels=4, sample_bits=16, max_payload=8972, capabilities=0x2B,
    board="sim", build_id="0123456789ab", ident="ethdaq sim test", max_rates=(1_000_000, 0, 2**32 - 1, 1),
    event_id_bits=(0, 12, 0, 31))


@pytest.fixture(scope="module")
def ctl_host(tmp_path_factory, repo):
    if shutil.which("gcc") is None:
        pytest.fail("gcc is required (make test installs it)")
    d = tmp_path_factory.mktemp("ctl")
    (d / "generated").mkdir()
    (d / "generated" / "ctl_protocol.h").write_text(protocol.c_header())
    exe = d / "ctl_host"
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-g", "-fsanitize=address,undefined",
                    "-fno-sanitize-recover=all", f"-I{d}", f"-I{repo}/software/firmware/protocol",
                    str(repo / "software/firmware/protocol/ctl.c"), str(repo / "software/firmware/protocol/hmac_sha256.c"),
                    str(repo / "test/firmware/c/ctl_host.c"), "-o", str(exe)],
                   check=True)

    def run(request, cap=2048, src_ip=0xC0A80164, stub_error=0):
        r = subprocess.run([str(exe), str(cap), str(src_ip), str(stub_error)], input=request,
                           capture_output=True, check=True)
        lines = r.stderr.decode().splitlines()
        counters = dict((k, int(v)) for k, v in re.findall(r"(\w+)=(-?\d+)", lines[-1]))
        counters["calls"] = [dict((k, v) for k, v in re.findall(r"(\w+)=(\S+)", line)) for line in lines[:-1]]
        return r.stdout, counters
    run.exe = exe
    return run


def test_identify_response_matches_python_definition_byte_for_byte(ctl_host):
    for seq in (0, 1, 0xDEADBEEF, 0xFFFFFFFF):
        rsp, cnt = ctl_host(protocol.identify_request(seq))
        assert rsp == protocol.pack_identify_response(seq, IDENTITY)
        assert cnt["requests"] == 1
        msg_type, got_seq, ident = protocol.parse_response(rsp, expect_seq=seq)
        assert (msg_type, got_seq, ident) == (protocol.MSG_IDENTIFY_RSP, seq, IDENTITY)


def test_identify_carries_the_declared_rates_after_the_strings_and_a_reply_without_them_parses():
    full = protocol.pack_identify_response(5, IDENTITY)
    # Before the 4 event layouts, the last 4 x 4 bytes: the channels' rates, big-endian, channel 0 first.
    assert struct.unpack(">4I", full[-20:-4]) == (1_000_000, 0, 2**32 - 1, 1)
    _, _, ident = protocol.parse_response(full[:-20])
    assert ident.max_rates == (0, 0, 0, 0) and ident.board == "sim"
    assert protocol.parse_response(full)[2].max_rates == IDENTITY.max_rates
    with pytest.raises(protocol.ProtocolError, match="none, 4 channel rates"):
        protocol.parse_response(full[:-8])
    # An Identity made without rates has every channel's undeclared.
    assert protocol.Identity(**dict(IDENTITY.__dict__, max_rates=())).max_rates == (0, 0, 0, 0)


def test_identify_carries_the_event_layouts_after_the_rates_only_from_a_board_with_an_event_channel():
    full = protocol.pack_identify_response(5, IDENTITY)
    assert full[-4:] == bytes([0, 12, 0, 31])
    ident = protocol.parse_response(full)[2]
    assert ident.event_id_bits == (0, 12, 0, 31) and ident.event_channels == {1: 12, 3: 31}
    # A reply with the rates and without the layouts (every board without an event channel, and
    # every board built before them) parses: every channel carries samples.
    ident = protocol.parse_response(full[:-4])[2]
    assert ident.event_id_bits == (0, 0, 0, 0) and ident.event_channels == {} and ident.max_rates == IDENTITY.max_rates
    samples_only = dataclasses.replace(IDENTITY, event_id_bits=())
    assert protocol.pack_identify_response(5, samples_only) == full[:-4]
    with pytest.raises(protocol.ProtocolError, match="or those and 4 event layouts of 1 byte"):
        protocol.parse_response(full[:-1])


def test_header_layout_is_big_endian_as_documented():
    assert protocol.identify_request(0x01020304) == bytes([0xED, 0xAC, 0x01, 0x01, 0x01, 0x02, 0x03, 0x04])


@pytest.mark.parametrize("request_bytes, counter", [
    (b"", "short"),
    (b"\xed\xac\x01\x01\x00\x00\x00", "short"),                  # 7 bytes: one short of a header.
    (b"\x12\x34\x01\x01\x00\x00\x00\x01", "magic"),
    (protocol.pack_header(protocol.MSG_IDENTIFY_RSP, 5), "response"),  # Never answer a response.
])
def test_malformed_requests_are_dropped_and_counted(ctl_host, request_bytes, counter):
    rsp, cnt = ctl_host(request_bytes)
    assert rsp == b""
    assert cnt[counter] == 1
    assert cnt["requests"] == 0


@pytest.mark.parametrize("request_bytes, code, counter", [
    (struct.pack(">HBBI", protocol.MAGIC, 2, protocol.MSG_IDENTIFY, 9), protocol.ERR_BAD_VERSION, "version"),
    (protocol.pack_header(0x33, 9), protocol.ERR_BAD_TYPE, "type"),
    (protocol.identify_request(9) + b"x", protocol.ERR_BAD_LENGTH, "length"),
])
def test_bad_requests_get_an_error_response_and_are_counted(ctl_host, request_bytes, code, counter):
    rsp, cnt = ctl_host(request_bytes)
    assert protocol.parse_response(rsp, expect_seq=9) == (protocol.MSG_ERROR_RSP, 9, code)
    assert cnt[counter] == 1


def test_response_that_does_not_fit_is_refused_not_overrun(ctl_host):
    full = protocol.pack_identify_response(7, IDENTITY)
    rsp, cnt = ctl_host(protocol.identify_request(7), cap=len(full) - 1)
    assert rsp == b"" and cnt["ret"] == -1 and cnt["no_room"] == 1
    rsp, cnt = ctl_host(protocol.identify_request(7), cap=len(full))
    assert rsp == full


def test_random_and_mutated_input_never_crashes(ctl_host):
    """Sanitizer-checked: any crash or out-of-bounds access fails the run (check=True)."""
    rng = random.Random(2026)
    seeds = [protocol.identify_request(1), protocol.pack_header(0x7F, 2), b"", protocol.stream_start_request(5),
             protocol.emulator_request(6, 1, 5), protocol.status_request(7)]
    for _ in range(150):
        data = bytearray(rng.choice(seeds))
        for _ in range(rng.randrange(4)):
            op = rng.randrange(3)
            if op == 0 and data:
                data[rng.randrange(len(data))] = rng.randrange(256)
            elif op == 1:
                data += bytes(rng.randrange(256) for _ in range(rng.randrange(20)))
            elif data:
                del data[rng.randrange(len(data)):]
        rsp, _ = ctl_host(bytes(data))
        if rsp:
            protocol.parse_response(rsp)  # Whatever it answers is well-formed.


def test_python_parser_rejects_truncated_and_trailing_data():
    full = protocol.pack_identify_response(3, IDENTITY)
    for cut in (len(full) - 1, protocol.HEADER.size + 5):
        with pytest.raises(protocol.ProtocolError):
            protocol.parse_response(full[:cut])
    with pytest.raises(protocol.ProtocolError, match="21 bytes after its strings"):
        protocol.parse_response(full + b"\x00")
    with pytest.raises(protocol.ProtocolError, match="sequence number must be 4, not 3"):
        protocol.parse_response(full, expect_seq=4)


def test_stream_start_defaults_destination_to_requester_and_echoes_run(ctl_host):
    req = protocol.stream_start_request(11, dst_ip=0, dst_port=5000, payload=1472, enable=0xF, backpressure=0b10, gap=9)
    rsp, cnt = ctl_host(req, src_ip=0xC0A80164)
    assert protocol.parse_response(rsp, expect_seq=11) == (protocol.MSG_STREAM_START | protocol.RESPONSE, 11, (42, 0xC0A80164))
    assert cnt["calls"] == [dict(call="stream_start", dst_ip=str(0xC0A80164), dst_port="5000", payload="1472",
                                 enable="15", backpressure="2", gap="9", dst_mac="00:00:00:00:00:00")]


def test_stream_start_carries_a_fixed_destination_mac(ctl_host):
    req = protocol.stream_start_request(14, dst_ip=0xC0A80164, dst_mac=protocol.parse_mac("02:aa:bb:cc:dd:0e"))
    rsp, cnt = ctl_host(req)
    assert protocol.parse_response(rsp, expect_seq=14)[0] == protocol.MSG_STREAM_START | protocol.RESPONSE
    assert cnt["calls"][0]["dst_mac"] == "02:aa:bb:cc:dd:0e"


@pytest.mark.parametrize("text", ["02:aa:bb:cc:dd", "02:aa:bb:cc:dd:zz", "2:aa:bb:cc:dd:0e:0f"])
def test_mac_parser_names_the_expected_form(text):
    with pytest.raises(ValueError, match="six hex bytes"):
        protocol.parse_mac(text)


@pytest.mark.parametrize("kwargs", [
    dict(payload=63), dict(payload=8973), dict(enable=0), dict(enable=0x10), dict(backpressure=0x20),
    dict(dst_port=0), dict(dst_ip=0xFFFFFFFF),
])
def test_stream_start_out_of_range_values_are_refused_before_touching_the_board(ctl_host, kwargs):
    rsp, cnt = ctl_host(protocol.stream_start_request(12, **kwargs))
    assert protocol.parse_response(rsp, expect_seq=12) == (protocol.MSG_ERROR_RSP, 12, protocol.ERR_BAD_VALUE)
    assert cnt["calls"] == [] and cnt["refused"] == 1
    # The reason names the field, the value sent and the range; the board's range is the one the
    # host derives from the protocol's table and the board's IDENTIFY.
    (name, value), = kwargs.items()
    refusal = protocol.parse_response(rsp)[2].refusal
    assert (refusal.name, refusal.value) == (name, value)
    assert (refusal.lo, refusal.hi) == ((0, 0xFFFFFFFE) if name == "dst_ip" else protocol.board_field_range(name, IDENTITY))


def test_error_replies_with_and_without_a_reason_round_trip():
    reason = protocol.Refusal(protocol.REFUSAL_FIELD_CODES["payload"], 9000, protocol.MIN_PAYLOAD, 8954)
    long = protocol.pack_error_response(5, protocol.ERR_BAD_VALUE, reason)
    assert len(long) == protocol.HEADER.size + 1 + protocol.REFUSAL.size
    assert long[protocol.HEADER.size:] == bytes([4, 1]) + (9000).to_bytes(8, "big") + (64).to_bytes(8, "big") \
        + (8954).to_bytes(8, "big")
    _, _, body = protocol.parse_response(long, expect_seq=5)
    assert body == protocol.ERR_BAD_VALUE and body.refusal == reason
    assert body.describe() == "payload 9000 out of range 64..8954"
    short = protocol.pack_error_response(6, protocol.ERR_BUSY)
    assert short == protocol.pack_header(protocol.MSG_ERROR_RSP, 6) + bytes([protocol.ERR_BUSY])
    _, _, body = protocol.parse_response(short)
    assert body == protocol.ERR_BUSY and body.refusal is None
    assert body.describe() == protocol.ERROR_NAMES[protocol.ERR_BUSY]
    negative = protocol.Refusal(protocol.REFUSAL_FIELD_CODES["ptp_log_sync"], -11, protocol.PTP_LOG_MIN, protocol.PTP_LOG_MAX)
    body = protocol.parse_response(protocol.pack_error_response(7, protocol.ERR_BAD_VALUE, negative))[2]
    assert body.describe() == "ptp_log_sync -11 out of range -10..6"
    mask = protocol.Refusal(protocol.REFUSAL_FIELD_CODES["enable"], 0x13, 1, 0xF)
    assert mask.describe() == "enable 0x13 out of range 0x1..0xf"
    for cut in (1, protocol.REFUSAL.size - 1):
        with pytest.raises(protocol.ProtocolError, match="error response must be 9 or 34 bytes"):
            protocol.parse_response(long[:-cut])
    assert protocol.Refusal(0x7F, 1, 2, 3).describe() == "field 0x7F 1 out of range 2..3"  # A later firmware's field.


def test_board_refusal_is_passed_on(ctl_host):
    rsp, cnt = ctl_host(protocol.stream_start_request(13), stub_error=protocol.ERR_BUSY)
    assert protocol.parse_response(rsp, expect_seq=13) == (protocol.MSG_ERROR_RSP, 13, protocol.ERR_BUSY)
    assert cnt["refused"] == 1


def test_stop_emulator_and_status_round_trip(ctl_host):
    rsp, cnt = ctl_host(protocol.stream_stop_request(1))
    assert protocol.parse_response(rsp, expect_seq=1) == (protocol.MSG_STREAM_STOP | protocol.RESPONSE, 1, (42,))
    rsp, cnt = ctl_host(protocol.emulator_request(2, mode=3, rate=0x80000000, seed=99))
    assert protocol.parse_response(rsp, expect_seq=2) == (protocol.MSG_EMULATOR | protocol.RESPONSE, 2, ())
    assert cnt["calls"] == [dict(call="emulator", mode="3", rate=str(0x80000000), seed="99")]
    rsp, _ = ctl_host(protocol.emulator_request(3, mode=4, rate=1))
    assert protocol.parse_response(rsp, expect_seq=3)[2] == protocol.ERR_BAD_VALUE
    rsp, _ = ctl_host(protocol.status_request(4))
    _, _, st = protocol.parse_response(rsp, expect_seq=4)
    assert (st.running, st.run, st.datagrams, st.dropped, st.port_rx_dropped, st.port_tx_dropped,
            st.arp_timeouts, st.dst_flags, st.dst_mac, st.stale) == (1, 42, 0x0000000100000002, 7, 3, 4, 5,
                                                          protocol.DST_VALID, bytes(range(0xa0, 0xa6)), 6)
    assert (st.boots, st.reset_cause_name, st.watchdog_resets, st.uptime_ms) == (3, "reboot", 1, 0)
    assert (st.rx_fcs_errors, st.rx_preamble_errors) == (11, 12)
    assert (st.dst_mac_changes, st.arp_refused) == (14, 15)
    assert (st.link_flags, st.link_speed, st.link_losses, st.phy_address, st.phy_id) == (
        protocol.LINK_PHY | protocol.LINK_UP | protocol.LINK_FULL_DUPLEX | protocol.LINK_AUTONEG, 1000, 13, 1, 0x65646171)
    assert st.link_text == "up, 1000 Mb/s full duplex (auto-negotiated)"
    rsp, _ = ctl_host(protocol.streams_request(5))
    assert len(rsp) == protocol.HEADER.size + protocol.STREAMS_RSP.size
    _, _, ss = protocol.parse_response(rsp, expect_seq=5)
    assert ss.run == 42 and len(ss.streams) == 4
    assert [s.enabled for s in ss.streams] == [True, True, False, True]
    assert [(s.stream, s.datagrams, s.bytes, s.dropped) for s in ss.streams] == [
        (i, 100 + i, 2**40 + i, 7 * i) for i in range(4)]
    # The records past the build's streams are zero, and say so.
    body = protocol.STREAMS_RSP.unpack_from(rsp, protocol.HEADER.size)
    assert body[1] == 4 and all(v == 0 for v in body[2 + 4 * 4:])



def test_launch_carries_its_frame_and_times_to_the_board_and_reports(ctl_host):
    frame = bytes.fromhex("020000000001 10e2d5000001 0800") + bytes(range(40))
    rsp, cnt = ctl_host(protocol.launch_request(7, protocol.LAUNCH_ARM, frame, sec=12, ns=999_999_999,
                                                period=1_000_000, count=10, relative=True))
    assert len(rsp) == protocol.HEADER.size + protocol.LAUNCH_RSP.size
    _, _, ls = protocol.parse_response(rsp, expect_seq=7)
    assert ls == protocol.LaunchStatus(armed=1, guard=1537, lead=7, cycle_ps=8000, sent=5, missed_past=6,
                                       missed_busy=7, first_sec=12, first_ns=999_999_999)
    assert cnt["calls"] == [dict(call="launch", op="1", flags=str(protocol.LAUNCH_RELATIVE), sec="12",
                                 ns="999999999", period="1000000", count="10", guard="0", frame=frame.hex())]
    rsp, cnt = ctl_host(protocol.launch_request(8, protocol.LAUNCH_QUERY))
    assert protocol.parse_response(rsp, expect_seq=8)[2].armed == 0
    assert cnt["calls"][0]["op"] == str(protocol.LAUNCH_QUERY) and "frame" not in cnt["calls"][0]  # Empty.


def _launch_raw(op=1, flags=0, sec=0, ns=0, period=0, count=1, guard=0, frame_len=20):
    return protocol.pack_header(protocol.MSG_LAUNCH, 9) + protocol.LAUNCH.pack(
        op, flags, sec, ns, period, count, guard, frame_len, bytes(protocol.LAUNCH_FRAME_MAX))


@pytest.mark.parametrize("fields", [dict(op=3), dict(flags=2), dict(sec=1 << 48), dict(ns=10**9),
                                    dict(period=10**9), dict(frame_len=13), dict(frame_len=protocol.LAUNCH_FRAME_MAX + 1)])
def test_launch_out_of_range_values_are_refused_before_touching_the_board(ctl_host, fields):
    rsp, cnt = ctl_host(_launch_raw(**fields))
    assert protocol.parse_response(rsp, expect_seq=9)[2] == protocol.ERR_BAD_VALUE
    assert cnt["calls"] == [] and cnt["refused"] == 1
    (name, value), = fields.items()
    refusal = protocol.parse_response(rsp)[2].refusal
    assert refusal.name == {"op": "launch_op", "flags": "launch_flags"}.get(name, name) and refusal.value == value
    assert not refusal.lo <= value <= refusal.hi
    # The Python builder refuses them too.
    with pytest.raises(protocol.ProtocolError):
        if "frame_len" in fields:
            protocol.launch_request(1, protocol.LAUNCH_ARM, bytes(fields["frame_len"]))
        elif "op" in fields:
            protocol.launch_request(1, fields["op"])
        elif "ns" in fields or "period" in fields:
            protocol.launch_request(1, protocol.LAUNCH_ARM, bytes(20), **fields)
        else:
            raise protocol.ProtocolError("flags and sec are not the builder's to get wrong")


def test_launch_of_a_build_without_the_launcher_is_unsupported_and_a_board_error_is_passed_on(ctl_host):
    rsp, _ = ctl_host(_launch_raw(), stub_error=protocol.ERR_BAD_VALUE)
    assert protocol.parse_response(rsp, expect_seq=9)[2] == protocol.ERR_BAD_VALUE

def test_probe_reports_the_classes_the_build_measures_byte_for_byte(ctl_host):
    rsp, cnt = ctl_host(protocol.probe_request(11))
    assert len(rsp) == protocol.HEADER.size + protocol.PROBE_RSP.size
    _, _, r = protocol.parse_response(rsp, expect_seq=11)
    assert (r.cycle_ps, r.tx_unpaired, r.tx_overflows, r.rx_unpaired, r.rx_overflows) == (8000, 1, 2, 3, 4)
    assert sorted(r.classes) == ["rx_fasttrack", "tx_cpu"]
    for name, c in r.classes.items():
        i = protocol.PROBE_CLASSES.index(name)
        assert (c.count, c.sum, c.sumsq, c.min, c.max) == (10 + i, 2**40 + i, 2**60 + i, 20 + i, 0xFFF0 + i)
        assert c.bins == [100 * i + k for k in range(protocol.PROBE_NBINS)]
        assert c.mean == (2**40 + i) / (10 + i)
    # The records of classes not measured are zero, whatever the driver left there.
    body = protocol.PROBE_RSP.unpack_from(rsp, protocol.HEADER.size)
    per = 5 + protocol.PROBE_NBINS
    for i, name in enumerate(protocol.PROBE_CLASSES):
        if name not in r.classes:
            assert all(v == 0 for v in body[6 + per * i:6 + per * (i + 1)]), name
    assert cnt["calls"] == [dict(call="probe", clear="0")]
    # A record of an absent class that is not empty is a protocol error on the host.
    bad = bytearray(rsp)
    bad[protocol.HEADER.size + 21] = 1   # tx_launch's count, high byte.
    with pytest.raises(protocol.ProtocolError, match="absent"):
        protocol.parse_response(bytes(bad))


def test_probe_clear_is_the_controllers_and_probe_of_a_build_without_probes_is_unsupported(ctl_host, ctl_session):
    rsp, cnt = ctl_host(protocol.probe_clear_request(12))
    assert protocol.parse_response(rsp, expect_seq=12) == (protocol.MSG_PROBE_CLEAR | protocol.RESPONSE, 12, ())
    assert cnt["calls"] == [dict(call="probe", clear="1")]
    answers, _, calls = ctl_session([
        (CONTROLLER, protocol.stream_stop_request(1)),     # CONTROLLER holds the board.
        (OTHER, protocol.probe_clear_request(2)),          # Refused, not executed.
        (OTHER, protocol.probe_request(3)),                # Reading is anybody's.
    ], times=[0, 10, 20])
    assert calls == ["stream_stop", "probe"]
    assert error_of(answers[1], 2) == protocol.ERR_NOT_CONTROLLER
    assert protocol.parse_response(answers[2], expect_seq=3)[0] == protocol.MSG_PROBE | protocol.RESPONSE
    rsp, _ = ctl_host(protocol.probe_request(13), stub_error=protocol.ERR_UNSUPPORTED)
    assert protocol.parse_response(rsp, expect_seq=13)[2] == protocol.ERR_UNSUPPORTED


def test_rules_report_the_table_its_counters_and_the_gates_drops_byte_for_byte(ctl_host):
    rsp, cnt = ctl_host(protocol.rules_request(14))
    assert len(rsp) == protocol.HEADER.size + protocol.RULES_RSP.size
    _, _, r = protocol.parse_response(rsp, expect_seq=14)
    assert (r.unmatched, r.gate_error, r.gate_full, r.gate_oversize) == (70, 71, 72, 73)
    assert [(x.index, x.enable, x.action_name, x.port, x.src_ip, x.matched, x.refused) for x in r.rules] == [
        (i, int(i == 0), "fasttrack", 9000 + i, 0xC0A80100 + i, 1000 + i, 2000 + i) for i in range(3)]
    assert r.rules[0].describe() == "UDP port 9000"
    # The record past the build's three rules is zero, whatever the driver left there.
    body = protocol.RULES_RSP.unpack_from(rsp, protocol.HEADER.size)
    per = len(protocol.RULE_RECORD.unpack(bytes(protocol.RULE_RECORD.size)))
    assert body[0] == 3 and all(v == 0 for v in body[5 + 3 * per:])
    assert cnt["calls"] == [dict(call="rules", read="1")]


@pytest.mark.parametrize("fields, ok", [
    (dict(index=1, action=2, match=protocol.RULE_MATCH_PORT, port=9100), True),
    (dict(index=2, action=0, match=protocol.RULE_MATCH_SRC, src_ip=0x0A000001), True),    # CPU: anything.
    (dict(index=3, enable=0, action=2), True),                                          # Disabled: anything.
    (dict(index=4, action=0), False),                                                   # No such rule.
    (dict(index=1, action=3, match=protocol.RULE_MATCH_PORT, port=9100), False),         # No such action.
    (dict(index=1, action=2, match=0x10), False),
    (dict(index=1, action=2, match=protocol.RULE_MATCH_SRC, src_ip=1), False),            # Drop needs a port.
    (dict(index=1, action=1, match=protocol.RULE_MATCH_PORT, port=7000), False),          # The control port.
    (dict(index=1, action=2, match=protocol.RULE_MATCH_PORT, port=319), False),           # PTP.
    (dict(index=1, action=2, match=protocol.RULE_MATCH_PORT | protocol.RULE_MATCH_PROTO, port=320), False),
])
def test_rule_set_is_checked_before_the_board_sees_it(ctl_host, fields, ok):
    f = dict(dict(enable=1, match=0, ethertype=0, proto=0, port=0, src_ip=0), **fields)
    rsp, cnt = ctl_host(protocol.rule_set_request(15, **f))
    msg_type, _, body = protocol.parse_response(rsp, expect_seq=15)
    if ok:
        assert msg_type == protocol.MSG_RULE_SET | protocol.RESPONSE
        assert body == protocol.Rule(**f)
        assert cnt["calls"] == [dict(call="rules", **{k: str(v) for k, v in f.items()})]
    else:
        assert body == protocol.ERR_BAD_VALUE and cnt["calls"] == []
    # protocol.check_rule, which the CLI uses, agrees (the control port here is 7000).
    try:
        protocol.check_rule(f["index"], f["enable"], f["action"], f["match"], f["port"], ctl_port=7000)
        assert ok
    except protocol.ProtocolError:
        assert not ok


def test_rule_set_is_the_controllers(ctl_session):
    answers, _, calls = ctl_session([
        (CONTROLLER, protocol.stream_stop_request(1)),
        (OTHER, protocol.rule_set_request(2, 1, action=2, match=protocol.RULE_MATCH_PORT, port=9100)),
        (OTHER, protocol.rules_request(3)),                # Reading is anybody's.
    ], times=[0, 10, 20])
    assert calls == ["stream_stop", "rules"]
    assert error_of(answers[1], 2) == protocol.ERR_NOT_CONTROLLER


def test_register_reads_and_writes_reach_the_front_end_byte_for_byte(ctl_host):
    rsp, cnt = ctl_host(protocol.reg_read_request(16, 8, 3))
    assert len(rsp) == protocol.HEADER.size + protocol.REG_WORDS.size
    assert protocol.parse_response(rsp, expect_seq=16) == (
        protocol.MSG_REG_READ | protocol.RESPONSE, 16, protocol.Registers(8, [0xF0000002, 0xF0000003, 0xF0000004]))
    assert all(v == 0 for v in protocol.REG_WORDS.unpack_from(rsp, protocol.HEADER.size)[2 + 3:])  # Unused words.
    assert cnt["calls"] == [dict(call="regs", write="0", offset="8", count="3", first="0")]
    rsp, cnt = ctl_host(protocol.reg_write_request(17, 4, [1500, 7]))
    assert protocol.parse_response(rsp, expect_seq=17)[2] == protocol.Registers(4, [1500, 7])
    assert cnt["calls"] == [dict(call="regs", write="1", offset="4", count="2", first="1500")]


@pytest.mark.parametrize("offset, count", [(2, 1), (0, 0), (0, protocol.REG_MAX_WORDS + 1)])
def test_register_requests_out_of_shape_are_refused_before_the_board_sees_them(ctl_host, offset, count):
    body = protocol.pack_header(protocol.MSG_REG_READ, 18) + protocol.REG_READ.pack(offset, count)
    rsp, cnt = ctl_host(body)
    assert protocol.parse_response(rsp, expect_seq=18)[2] == protocol.ERR_BAD_VALUE and cnt["calls"] == []
    refusal = protocol.parse_response(rsp)[2].refusal   # An offset's alignment is no range: no reason.
    assert (refusal and (refusal.name, refusal.value, refusal.lo, refusal.hi)) == (
        None if count == 1 else ("reg_count", count, 1, protocol.REG_MAX_WORDS))
    with pytest.raises(protocol.ProtocolError):
        protocol.reg_read_request(18, offset, count)


def test_registers_past_the_front_end_or_without_one_are_refused(ctl_host):
    rsp, _ = ctl_host(protocol.reg_read_request(19, 28, 2))          # 8 registers: 28 + 8 > 32.
    assert protocol.parse_response(rsp, expect_seq=19)[2] == protocol.ERR_BAD_VALUE
    rsp, _ = ctl_host(protocol.reg_read_request(20, 0), stub_error=protocol.ERR_UNSUPPORTED)
    assert protocol.parse_response(rsp, expect_seq=20)[2] == protocol.ERR_UNSUPPORTED


def test_register_writes_are_the_controllers(ctl_session):
    answers, _, calls = ctl_session([
        (CONTROLLER, protocol.stream_stop_request(1)),
        (OTHER, protocol.reg_write_request(2, 0, [1])),
        (OTHER, protocol.reg_read_request(3, 0)),              # Reading is anybody's.
    ], times=[0, 10, 20])
    assert calls == ["stream_stop", "regs"]
    assert error_of(answers[1], 2) == protocol.ERR_NOT_CONTROLLER


# --- RX_STATS: received frames the board did not use, by cause ------------------------------------

CTL_CODES = {code for code, name, _ in protocol.RX_COUNTERS if name.startswith("ctl_")}   # The handler's own.


def fake_rx_counter(code, audit=True, gate=True):
    """test/firmware/c/ctl_host.c's board: (present, value) of a counter that is not the handler's."""
    if code < len(protocol.RX_AUDIT_CAUSES):
        return audit, (1 << 40) + code
    return (gate or protocol.RX_COUNTER_NAMES[code] != "rx_full"), 1000 + code


@pytest.mark.parametrize("stub_error, audit, gate", [(0, True, True), (protocol.ERR_UNSUPPORTED, False, False)])
def test_rx_stats_answers_the_builds_counters_in_code_order_byte_for_byte(ctl_host, stub_error, audit, gate):
    """The board's hook is asked for every counter of protocol.RX_COUNTERS but the handler's own,
    in code order; the answer lists those the build has (a build without the receive audit has
    no 0x00-0x1F codes, one without the frame gate no rx_full) and the handler's own (0 here)."""
    rsp, cnt = ctl_host(protocol.rx_stats_request(21), stub_error=stub_error)
    records = []
    for code, name, _ in protocol.RX_COUNTERS:
        present, value = (True, 0) if code in CTL_CODES else fake_rx_counter(code, audit, gate)
        if present:
            records.append((code, value))
    assert rsp == protocol.pack_header(protocol.MSG_RX_STATS | protocol.RESPONSE, 21) + protocol.rx_stats_body(records)
    msg_type, seq, stats = protocol.parse_response(rsp, expect_seq=21)
    assert (msg_type, seq) == (protocol.MSG_RX_STATS | protocol.RESPONSE, 21)
    assert list(stats.items()) == [(protocol.RX_COUNTER_NAMES[code], v) for code, v in records]
    assert [int(c["code"]) for c in cnt["calls"]] == [code for code, _, _ in protocol.RX_COUNTERS if code not in CTL_CODES]
    assert cnt["requests"] == 1 and len(rsp) <= protocol.HEADER.size + protocol.RX_STATS_RSP_MAX


def test_rx_stats_counts_the_control_ports_malformed_datagrams_and_is_anybodys(ctl_session):
    bad = [b"\xed\xac\x01", b"\x12\x34\x01\x01\x00\x00\x00\x01", b"\x00" * 12,   # short, magic, magic,
           protocol.pack_header(protocol.MSG_RX_STATS | protocol.RESPONSE, 3),     # a response,
           struct.pack(">HBBI", protocol.MAGIC, 2, protocol.MSG_RX_STATS, 4),      # wrong version,
           protocol.pack_header(0x7E, 5), protocol.pack_header(0x7D, 6),           # unknown type (two),
           protocol.rx_stats_request(7) + b"\x00"]                                 # wrong length.
    answers, cnt, _ = ctl_session([(CONTROLLER, protocol.stream_stop_request(1))] + [(OTHER, b) for b in bad]
                                  + [(OTHER, protocol.rx_stats_request(8))], times=[0] + [10] * (len(bad) + 1))
    stats = protocol.parse_response(answers[-1], expect_seq=8)[2]   # Not the controller's: answered all the same.
    assert {k: v for k, v in stats.items() if k.startswith("ctl_")} == dict(
        ctl_short=1, ctl_magic=2, ctl_response=1, ctl_version=1, ctl_type=2, ctl_length=1)
    assert error_of(answers[-2], 7) == protocol.ERR_BAD_LENGTH
    assert (cnt["short"], cnt["magic"], cnt["type"], cnt["length"]) == (1, 2, 2, 1)


def test_rx_stats_with_a_wrong_length_is_refused_and_asks_the_board_nothing(ctl_host):
    for request in (protocol.rx_stats_request(9) + b"\x00", protocol.rx_stats_request(9) + bytes(9)):
        rsp, cnt = ctl_host(request)
        assert protocol.parse_response(rsp, expect_seq=9) == (protocol.MSG_ERROR_RSP, 9, protocol.ERR_BAD_LENGTH)
        assert cnt["length"] == 1 and cnt["calls"] == []


def test_rx_stats_answer_that_does_not_fit_is_refused_not_overrun(ctl_host):
    full, _ = ctl_host(protocol.rx_stats_request(10))
    for cap in (len(full) - 1, protocol.HEADER.size, protocol.HEADER.size - 1):
        rsp, cnt = ctl_host(protocol.rx_stats_request(10), cap=cap)
        assert rsp == b"" and cnt["ret"] == -1 and cnt["no_room"] == 1
    rsp, _ = ctl_host(protocol.rx_stats_request(10), cap=len(full))
    assert rsp == full


def test_rx_stats_parser_keeps_unknown_codes_and_refuses_what_no_board_sends():
    P = protocol
    body = P.rx_stats_body([(0x00, 5), (0x10, 2**64 - 1), (0x41, 2), (0x7F, 9)])
    stats = P.RxStats.unpack(body)
    assert list(stats.items()) == [("rx_ok", 5), ("udp_port", 2**64 - 1), ("ctl_magic", 2), ("code_0x7f", 9)]
    assert stats.pack() == body and P.RxStats.unpack(P.rx_stats_body([])) == {}
    assert P.parse_response(P.pack_header(P.MSG_RX_STATS | P.RESPONSE, 1) + body)[2] == stats
    for bad, text in ((b"", "no record count"),
                      (body[:-1], "with 4 records must be 45 bytes, not 44"),
                      (body + b"\x00", "must be 45 bytes, not 46"),
                      (P.rx_stats_body([(i, 0) for i in range(P.RX_STATS_MAX + 1)]), "at most 64 records, not 65"),
                      (P.rx_stats_body([(0x10, 1), (0x06, 1)]), "code 0x06 after 0x10"),
                      (P.rx_stats_body([(0x06, 1), (0x06, 1)]), "code 0x06 after 0x06")):
        with pytest.raises(P.ProtocolError, match=re.escape(text)):
            P.RxStats.unpack(bad)
    with pytest.raises(ValueError, match="no receive counter 'nope'"):
        P.rx_counter_code("nope")


def test_rx_stats_codes_reach_the_firmware_from_the_one_table(repo):
    """c_header() names every code and lists them in order (the handler answers in that order);
    docs/protocol.md has the table as protocol.py has it."""
    header = protocol.c_header()
    codes = [code for code, _, _ in protocol.RX_COUNTERS]
    assert "#define CTL_RX_COUNTER_CODES { " + ", ".join(f"0x{c:02X}u" for c in codes) + " }" in header
    for code, name, text in protocol.RX_COUNTERS:
        assert re.search(rf"#define CTL_RX_COUNTER_{name.upper()} +0x{code:02X}u\n", header), name
    doc = (repo / "docs" / "protocol.md").read_text()
    rows = [f"| 0x{code:02X} | {name} | {text} |" for code, name, text in protocol.RX_COUNTERS]
    assert [line for line in doc.splitlines() if re.match(r"\| 0x[0-9A-F]{2} \| [a-z_]+ \| ", line)] == rows
    # The longest answer fits the firmware's send buffer (main.c checks it too, when it is built).
    ctlport = (repo / "software" / "firmware" / "drivers" / "ctlport.h").read_text()
    send_buffer = int(re.search(r"#define CTLPORT_MAX_DATAGRAM (\d+)", ctlport).group(1))
    assert protocol.HEADER.size + protocol.RX_STATS_RSP_MAX <= send_buffer


# --- Retransmission safety: the reply cache --------------------------------------------------------

CONTROLLER, OTHER = (0xC0A80164, 40000), (0xC0A80165, 40000)
KEY = bytes(range(32))


@pytest.fixture(scope="module")
def ctl_session(ctl_host):
    """Runs requests [(src, request bytes)] through one ctl_handle state; returns the answers
    (bytes; b"" for none), the counters and the board calls made."""
    exe = ctl_host.exe

    def run(requests, stub_error=0, ident="ethdaq sim test", allow=(), times=None, key=b""):
        """times: the board's clock in ms at each request (default 0 for all)."""
        times = times or [0] * len(requests)
        data = b"".join(struct.pack(">IHIH", ip, port, t, len(req)) + req
                        for ((ip, port), req), t in zip(requests, times))
        allow_arg = ",".join(f"{net}/{mask}" for net, mask in allow)
        r = subprocess.run([str(exe), "2048", "session", str(stub_error), ident, allow_arg, key.hex()],
                           input=data, capture_output=True, check=True)
        out, answers = r.stdout, []
        while out:
            (n,) = struct.unpack_from(">H", out)
            assert n != 0xFFFF
            answers.append(out[2:2 + n])
            out = out[2 + n:]
        assert len(answers) == len(requests)
        lines = r.stderr.decode().splitlines()
        counters = dict((k, int(v)) for k, v in re.findall(r"(\w+)=(-?\d+)", lines[-1]))
        calls = [re.match(r"call=(\w+)", line).group(1) for line in lines[:-1]]
        return answers, counters, calls
    return run


def test_a_retransmitted_request_is_answered_again_not_executed_again(ctl_session):
    start = protocol.stream_start_request(100, dst_port=6000)
    answers, cnt, calls = ctl_session([(CONTROLLER, start)] * 3)
    assert calls == ["stream_start"]                       # Executed once...
    assert answers[0] == answers[1] == answers[2]          # ...answered three times, identically.
    assert protocol.parse_response(answers[0], expect_seq=100)[2] == (42, CONTROLLER[0])
    assert (cnt["requests"], cnt["replayed"], cnt["stale_seq"]) == (1, 2, 0)


def test_replay_is_per_requester_and_per_request(ctl_session):
    stop = protocol.stream_stop_request
    answers, cnt, calls = ctl_session([
        (CONTROLLER, stop(7)),
        ((CONTROLLER[0], CONTROLLER[1] + 2), stop(7)),      # Same seq from elsewhere: a new request.
        ((CONTROLLER[0], CONTROLLER[1] + 1), stop(7)),      # Same address, another port: too.
        (CONTROLLER, stop(8)),                              # Next seq: executed.
        (CONTROLLER, stop(8)),                              # Retransmission: answered from the cache.
    ])
    assert calls == ["stream_stop"] * 4 and cnt["replayed"] == 1
    assert answers[3] == answers[4]


def test_old_or_reused_seqs_are_refused_with_a_status_and_counted(ctl_session):
    start = lambda seq, port=5000: protocol.stream_start_request(seq, dst_port=port)
    answers, cnt, calls = ctl_session([
        (CONTROLLER, start(1)),
        (CONTROLLER, protocol.stream_stop_request(2)),
        (CONTROLLER, start(1)),               # A copy of the first, delayed past the second: refused.
        (CONTROLLER, start(2)),               # The last seq on another request: refused.
        (CONTROLLER, start(3, port=5001)),    # A new seq: executed.
    ])
    assert calls == ["stream_start", "stream_stop", "stream_start"]
    for i, seq in ((2, 1), (3, 2)):
        assert protocol.parse_response(answers[i], expect_seq=seq) == (protocol.MSG_ERROR_RSP, seq,
                                                                       protocol.ERR_STALE_SEQ)
    assert cnt["stale_seq"] == 2 and cnt["requests"] == 3


def test_the_history_and_the_number_of_requesters_are_bounded_as_documented(ctl_session):
    stop = protocol.stream_stop_request
    n = protocol.REPLAY_HISTORY
    # Seqs 0..n+1: 0 and 1 fell out of the history of the last n before n+1; 2 has not.
    reqs = [(CONTROLLER, stop(seq)) for seq in range(n + 2)] + [(CONTROLLER, stop(s)) for s in (0, 2)]
    answers, cnt, calls = ctl_session(reqs)
    assert len(calls) == n + 3 and cnt["stale_seq"] == 1
    assert protocol.parse_response(answers[-1], expect_seq=2)[2] == protocol.ERR_STALE_SEQ
    # REPLAY_SOURCES other requesters push the controller out: its retransmission executes again.
    # (Other ports of the controller's address: other addresses would be refused, not executed.)
    others = [((CONTROLLER[0], 1000 + i), stop(i)) for i in range(protocol.REPLAY_SOURCES)]
    answers, cnt, calls = ctl_session([(CONTROLLER, stop(50))] + others + [(CONTROLLER, stop(50))])
    assert calls.count("stream_stop") == protocol.REPLAY_SOURCES + 2 and cnt["replayed"] == 0
    # One fewer keeps it.
    answers, cnt, calls = ctl_session([(CONTROLLER, stop(50))] + others[:-1] + [(CONTROLLER, stop(50))])
    assert cnt["replayed"] == 1


def test_malformed_requests_and_refusals_leave_the_cache_consistent(ctl_session):
    start = protocol.stream_start_request(9)
    answers, cnt, calls = ctl_session([
        (CONTROLLER, start[:-1]),                                    # bad length: not remembered
        (CONTROLLER, start),
        (CONTROLLER, start),
    ], stub_error=protocol.ERR_BUSY)
    assert calls == ["stream_start"] and cnt["length"] == 1 and cnt["replayed"] == 1
    assert protocol.parse_response(answers[2], expect_seq=9) == (protocol.MSG_ERROR_RSP, 9, protocol.ERR_BUSY)


@pytest.mark.parametrize("ident, kept", [("short", True), ("x" * 200, False)])
def test_identify_is_answered_afresh_when_its_answer_is_too_long_to_keep(ctl_session, ident, kept):
    req = protocol.identify_request(77)
    answers, cnt, _ = ctl_session([(CONTROLLER, req)] * 2, ident=ident)
    assert (len(answers[0]) <= protocol.REPLAY_RSP_MAX) == kept
    assert answers[0] == answers[1] and cnt["stale_seq"] == 0
    assert (cnt["requests"], cnt["replayed"]) == ((1, 1) if kept else (2, 0))
    assert protocol.parse_response(answers[1], expect_seq=77)[2].ident == ident


# --- Fuzzing ------------------------------------------------------------------------------------

def test_standalone_fuzzer_keeps_every_invariant_and_reaches_the_reply_cache(ctl_host, repo, tmp_path):
    """test/firmware/c/ctl_fuzz.c with gcc and the sanitizers: mutated conversations of valid requests
    (retransmissions, stale and reused seqs, small answer buffers, failing board operations)."""
    exe = tmp_path / "ctl_fuzz"
    gen = Path(ctl_host.exe).parent
    subprocess.run(["gcc", "-std=c99", "-D_DEFAULT_SOURCE", "-O1", "-g", "-Wall", "-Wextra", "-Werror",
                    "-fsanitize=address,undefined", "-fno-sanitize-recover=all", f"-I{gen}",
                    f"-I{repo}/software/firmware/protocol", str(repo / "software/firmware/protocol/ctl.c"),
                    str(repo / "software/firmware/protocol/hmac_sha256.c"), str(repo / "test/firmware/c/ctl_fuzz.c"), "-o", str(exe)],
                   check=True)
    r = subprocess.run([str(exe), "30000", "7"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    got = dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", r.stdout))
    assert "no invariant broken" in r.stdout
    assert all(got[k] > 1000 for k in ("requests", "refused", "replayed", "stale_seq", "no_room", "bad_length"))


def test_libfuzzer_short_run_of_every_firmware_parser(tmp_path):
    """bench/fuzz.py as the bench runs it, 100,000 inputs per harness instead of 10 million."""
    if shutil.which("clang") is None:
        pytest.fail("clang is required (make test installs clang and libclang-rt-14-dev)")
    r = subprocess.run([sys.executable, str(Path(__file__).parents[2] / "bench" / "fuzz.py"), "--runs", "100000",
                        "--build-dir", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {line.split()[0]: line.split() for line in r.stdout.splitlines()
            if line.split()[:1] in (["ctl"], ["ptp"], ["dhcp"])}
    assert set(rows) == {"ctl", "ptp", "dhcp"}
    for name, row in rows.items():
        assert row[1] == "100,000" and row[-1] == "0", row


# --- Who may change the board's state ---------------------------------------------------------------

def error_of(answer, seq):
    msg_type, _, body = protocol.parse_response(answer, expect_seq=seq)
    return body if msg_type == protocol.MSG_ERROR_RSP else None


def test_the_first_controller_holds_the_board_and_others_are_refused_with_a_status(ctl_session):
    answers, cnt, calls = ctl_session([
        (CONTROLLER, protocol.stream_start_request(1)),    # Nobody held it: CONTROLLER now does.
        (OTHER, protocol.stream_stop_request(1)),          # Refused, not executed.
        (OTHER, protocol.emulator_request(2, 1, 5)),       # Refused.
        (OTHER, protocol.status_request(3)),               # Reading is anybody's.
        (OTHER, protocol.claim_request(4)),                # Not granted: says who holds it.
        (CONTROLLER, protocol.stream_stop_request(2)),     # The controller goes on.
        (OTHER, protocol.launch_request(5, protocol.LAUNCH_ARM, bytes(20))),  # Refused.
        (OTHER, protocol.launch_request(6, protocol.LAUNCH_QUERY)),           # Reading is anybody's.
    ], times=[0, 1000, 2000, 3000, 4000, 5000, 5000, 5000])
    assert calls == ["stream_start", "stream_stop", "launch"]
    assert error_of(answers[6], 5) == protocol.ERR_NOT_CONTROLLER
    assert protocol.parse_response(answers[7], expect_seq=6)[2].armed == 0
    assert error_of(answers[1], 1) == error_of(answers[2], 2) == protocol.ERR_NOT_CONTROLLER
    st = protocol.parse_response(answers[3], expect_seq=3)[2]
    assert st.controller_ip == CONTROLLER[0] and st.lease_ms == protocol.DEFAULT_LEASE_S * 1000 - 3000
    assert protocol.parse_response(answers[4], expect_seq=4)[2] == (0, CONTROLLER[0],
                                                                    protocol.DEFAULT_LEASE_S * 1000 - 4000)
    assert cnt["not_controller"] == 4 and cnt["requests"] == 4


def test_the_lease_lapses_or_is_released_and_then_another_controller_may_claim(ctl_session):
    lease = protocol.DEFAULT_LEASE_S * 1000
    answers, cnt, calls = ctl_session([
        (CONTROLLER, protocol.claim_request(1, lease_s=10)),   # 10 s
        (OTHER, protocol.stream_stop_request(1)),              # at 9.999 s: refused
        (CONTROLLER, protocol.status_request(2)),              # reading does not renew
        (OTHER, protocol.stream_stop_request(2)),              # at 10 s: the lease lapsed
        (CONTROLLER, protocol.stream_stop_request(3)),         # OTHER holds it now (default lease)
        (OTHER, protocol.release_request(3)),
        (CONTROLLER, protocol.stream_stop_request(4)),         # free again: CONTROLLER takes it
        (OTHER, protocol.release_request(4)),                  # not OTHER's to release
    ], times=[0, 9999, 9999, 10000, 10001, 10002, 10003, 10004])
    assert protocol.parse_response(answers[0], expect_seq=1)[2] == (1, CONTROLLER[0], 10000)
    assert error_of(answers[1], 1) == protocol.ERR_NOT_CONTROLLER
    assert protocol.parse_response(answers[2], expect_seq=2)[2].lease_ms == 1
    assert error_of(answers[3], 2) is None and error_of(answers[4], 3) == protocol.ERR_NOT_CONTROLLER
    assert protocol.parse_response(answers[5], expect_seq=3)[0] == protocol.MSG_RELEASE | protocol.RESPONSE
    assert error_of(answers[6], 4) is None and error_of(answers[7], 4) == protocol.ERR_NOT_CONTROLLER
    assert calls == ["stream_stop", "stream_stop"]
    del lease


def test_each_accepted_request_renews_the_lease_and_claim_checks_its_length(ctl_session):
    answers, cnt, _ = ctl_session([
        (CONTROLLER, protocol.claim_request(1, lease_s=5)),
        (CONTROLLER, protocol.stream_stop_request(2)),                        # at 4 s: renews 5 s
        (OTHER, protocol.stream_stop_request(1)),                             # at 8 s: refused
        (CONTROLLER, protocol.claim_request(3, lease_s=protocol.MAX_LEASE_S + 1)),
        (CONTROLLER, protocol.claim_request(4, lease_s=protocol.MAX_LEASE_S)),
    ], times=[0, 4000, 8000, 8000, 8000])
    assert error_of(answers[2], 1) == protocol.ERR_NOT_CONTROLLER
    assert error_of(answers[3], 3) == protocol.ERR_BAD_VALUE
    assert error_of(answers[3], 3).describe() == f"lease_s {protocol.MAX_LEASE_S + 1} out of range 0..{protocol.MAX_LEASE_S} (0: the default)"
    assert protocol.parse_response(answers[4], expect_seq=4)[2] == (1, CONTROLLER[0], protocol.MAX_LEASE_S * 1000)


def test_the_allow_list_keeps_other_addresses_from_changing_anything(ctl_session):
    allow = [(0xC0A80100, 0xFFFFFF00)]                     # 192.168.1.0/24: CONTROLLER and OTHER
    outsider = (0x0A000005, 1234)
    answers, cnt, calls = ctl_session([
        (outsider, protocol.stream_start_request(1)),
        (outsider, protocol.claim_request(2)),
        (outsider, protocol.release_request(3)),
        (outsider, protocol.identify_request(4)),           # reading stays open
        (CONTROLLER, protocol.stream_start_request(1)),
    ], allow=allow)
    assert [error_of(a, s) for a, s in zip(answers[:3], (1, 2, 3))] == [protocol.ERR_NOT_ALLOWED] * 3
    assert error_of(answers[3], 4) is None and error_of(answers[4], 1) is None
    assert calls == ["stream_start"] and cnt["not_allowed"] == 3


def test_a_refusal_is_cached_like_any_answer(ctl_session):
    # OTHER's refused STOP, retransmitted after CONTROLLER released: still the same refusal (its
    # seq was answered), so one datagram's fate never depends on which copy arrived.
    answers, cnt, calls = ctl_session([
        (CONTROLLER, protocol.claim_request(1)),
        (OTHER, protocol.stream_stop_request(9)),
        (CONTROLLER, protocol.release_request(2)),
        (OTHER, protocol.stream_stop_request(9)),
    ])
    assert answers[1] == answers[3] and error_of(answers[3], 9) == protocol.ERR_NOT_CONTROLLER
    assert calls == [] and cnt["replayed"] == 1


# --- Shared-key authentication -----------------------------------------------------------------------




def test_with_a_key_state_changes_need_a_right_signature_and_a_new_counter(ctl_session):
    start = protocol.stream_start_request(1)
    answers, cnt, calls = ctl_session([
        (CONTROLLER, start),                                               # unsigned: refused
        (CONTROLLER, protocol.status_request(2)),                          # reading needs none
        (CONTROLLER, protocol.sign(protocol.stream_start_request(3), b"\x01" * 32, 100)),  # other key
        (CONTROLLER, protocol.sign(protocol.stream_start_request(4), KEY, 100)),            # right
        (CONTROLLER, protocol.sign(protocol.stream_stop_request(5), KEY, 100)),             # counter reused
        (CONTROLLER, protocol.sign(protocol.stream_stop_request(6), KEY, 99)),              # counter older
        (CONTROLLER, protocol.sign(protocol.stream_stop_request(7), KEY, 101)),             # right
    ], key=KEY)
    errors = [error_of(a, s) for a, s in zip(answers, range(1, 8))]
    assert errors == [protocol.ERR_AUTH_REQUIRED, None, protocol.ERR_AUTH_FAILED, None,
                      protocol.ERR_AUTH_FAILED, protocol.ERR_AUTH_FAILED, None]
    assert calls == ["stream_start", "stream_stop"]
    assert (cnt["auth_required"], cnt["auth_failed"]) == (1, 3)


def test_a_retransmitted_signed_request_is_answered_from_the_cache_not_refused(ctl_session):
    signed = protocol.sign(protocol.emulator_request(8, 1, 1 << 20), KEY, 5000)
    answers, cnt, calls = ctl_session([(CONTROLLER, signed)] * 3, key=KEY)
    assert calls == ["emulator"] and cnt["replayed"] == 2 and cnt["auth_failed"] == 0
    assert answers[0] == answers[1] == answers[2] and error_of(answers[0], 8) is None


def test_forged_unsigned_requests_do_not_disturb_the_controllers_reply_cache(ctl_session):
    # A forger using the controller's address and port: unsigned, so refused and not remembered;
    # the controller's retransmission is still answered from the cache, not run twice.
    signed = protocol.sign(protocol.stream_start_request(20), KEY, 1)
    forged = [(CONTROLLER, protocol.stream_stop_request(21 + i)) for i in range(protocol.REPLAY_HISTORY + 2)]
    answers, cnt, calls = ctl_session([(CONTROLLER, signed)] + forged + [(CONTROLLER, signed)], key=KEY)
    assert calls == ["stream_start"] and cnt["replayed"] == 1
    assert answers[-1] == answers[0]


def test_claim_and_release_need_a_signature_too_and_a_keyless_board_refuses_signed_requests(ctl_session):
    answers, _, _ = ctl_session([(CONTROLLER, protocol.claim_request(1)),
                                 (CONTROLLER, protocol.sign(protocol.claim_request(2), KEY, 7))], key=KEY)
    assert error_of(answers[0], 1) == protocol.ERR_AUTH_REQUIRED
    assert protocol.parse_response(answers[1], expect_seq=2)[2][0] == 1
    answers, cnt, calls = ctl_session([(CONTROLLER, protocol.sign(protocol.stream_stop_request(3), KEY, 7))])
    assert error_of(answers[0], 3) == protocol.ERR_UNSUPPORTED and calls == []


# --- CONFIG_GET / CONFIG_SET -------------------------------------------------------------------------

def config_of(answer, seq):
    msg_type, _, body = protocol.parse_response(answer, expect_seq=seq)
    assert msg_type in (protocol.MSG_CONFIG_GET | protocol.RESPONSE, protocol.MSG_CONFIG_SET | protocol.RESPONSE)
    return body


def test_config_get_reports_the_build_settings_and_set_changes_only_the_masked_fields(ctl_session):
    answers, cnt, calls = ctl_session([
        (CONTROLLER, protocol.config_get_request(1)),
        (CONTROLLER, protocol.config_set_request(2, payload=1024, dst_port=6001, gap=10)),
        (OTHER, protocol.config_get_request(3)),      # Reading is anybody's.
    ])
    boot = config_of(answers[0], 1)
    assert (boot.ip, boot.mac, boot.payload, boot.dst_port, boot.enable) == (0xC0A80132, bytes.fromhex("10e2d5000001"),
                                                                           1472, 5000, 0x0F)
    assert (boot.ptp_priority1, boot.ptp_log_announce, boot.emulator_rate) == (128, 1, 0x80000000)
    changed = config_of(answers[1], 2)
    assert changed == config_of(answers[2], 3)
    assert (changed.payload, changed.dst_port, changed.gap) == (1024, 6001, 10)
    assert {k: v for k, v in changed.__dict__.items() if k not in ("payload", "dst_port", "gap")} == \
        {k: v for k, v in boot.__dict__.items() if k not in ("payload", "dst_port", "gap")}
    assert calls == [] and cnt["requests"] == 3  # Stream settings wait for the next start.


def test_config_set_applies_ptp_and_emulator_settings_at_once(ctl_session):
    answers, _, calls = ctl_session([
        (CONTROLLER, protocol.config_set_request(1, ptp_role=2, ptp_log_sync=-3, ptp_priority1=10,
                                                 emulator_mode=3, emulator_rate=1 << 20)),
    ])
    assert calls == ["ptp_config", "emulator"]  # The PTP port restarted, the emulators set.
    c = config_of(answers[0], 1)
    assert (c.ptp_role, c.ptp_log_sync, c.ptp_priority1, c.emulator_mode, c.emulator_rate) == (2, -3, 10, 3, 1 << 20)


def test_config_set_checks_everything_before_applying_anything(ctl_session):
    answers, cnt, calls = ctl_session([
        (CONTROLLER, protocol.config_set_request(1, payload=1024, ptp_log_sync=7)),   # one bad: none set
        (CONTROLLER, protocol.config_set_request(2, enable=0x10)),                     # no channel 4
        (CONTROLLER, protocol.config_set_request(3, payload=63)),
        (CONTROLLER, protocol.config_set_request(4, emulator_mode=4)),
        (CONTROLLER, protocol.config_set_request(5, ip=0xE0000001)),                   # multicast
        (CONTROLLER, protocol.config_set_request(6, ptp_transport=1)),
        (CONTROLLER, protocol.pack_header(protocol.MSG_CONFIG_SET, 7)
            + struct.pack(">I", 1 << len(protocol.CONFIG_FIELDS)) + bytes(protocol.CONFIG.size)),  # unknown bit
        (CONTROLLER, protocol.config_get_request(8)),
    ])
    codes = [error_of(a, s) for a, s in zip(answers[:7], range(1, 8))]
    assert codes == [protocol.ERR_BAD_VALUE] * 5 + [protocol.ERR_UNSUPPORTED] + [protocol.ERR_BAD_VALUE]
    reasons = [c.refusal and c.refusal.describe() for c in codes]
    assert reasons == ["ptp_log_sync 7 out of range -10..6", "enable 0x10 out of range 0x1..0xf",
                       "payload 63 out of range 64..8972", "emulator_mode 4 out of range 0..3",
                       None, None,  # An address is no range; a fixed field is unsupported.
                       f"config_mask 0x{1 << len(protocol.CONFIG_FIELDS):x} out of range 0x0..0x{(1 << len(protocol.CONFIG_FIELDS)) - 1:x}"]
    c = config_of(answers[7], 8)
    assert (c.payload, c.ptp_log_sync, c.enable, c.emulator_mode) == (1472, 0, 0x0F, 0)
    assert calls == [] and cnt["refused"] == 7


def test_config_set_is_the_controllers_alone_and_emulator_settings_are_remembered(ctl_session):
    answers, cnt, calls = ctl_session([
        (CONTROLLER, protocol.claim_request(1)),
        (OTHER, protocol.config_set_request(2, payload=512)),
        (CONTROLLER, protocol.stream_start_request(3, dst_port=7777, payload=256, enable=0x3)),
        (CONTROLLER, protocol.emulator_request(4, 2, 1 << 16, seed=9)),
        (OTHER, protocol.config_get_request(5)),
        (CONTROLLER, protocol.reboot_request(6, boots=3)),
        (CONTROLLER, protocol.config_get_request(7)),   # After the reboot: the build's settings again.
    ])
    assert error_of(answers[1], 2) == protocol.ERR_NOT_CONTROLLER
    c = config_of(answers[4], 5)
    assert (c.dst_ip, c.dst_port, c.payload, c.enable) == (0, 5000, 1472, 0xF)  # A start is one-off.
    assert (c.emulator_mode, c.emulator_rate, c.emulator_seed) == (2, 1 << 16, 9)
    c = config_of(answers[6], 7)
    assert (c.dst_port, c.payload, c.emulator_mode) == (5000, 1472, 0)
    assert calls == ["stream_start", "emulator", "reboot"]


def test_config_set_needs_a_signature_with_a_key(ctl_session):
    answers, _, calls = ctl_session([
        (CONTROLLER, protocol.config_set_request(1, ptp_domain=4)),
        (CONTROLLER, protocol.sign(protocol.config_set_request(2, ptp_domain=4), KEY, 10)),
    ], key=KEY)
    assert error_of(answers[0], 1) == protocol.ERR_AUTH_REQUIRED
    assert config_of(answers[1], 2).ptp_domain == 4 and calls == ["ptp_config"]


def test_address_change_is_taken_after_the_answer_and_bad_addresses_change_nothing(ctl_session):
    new_mac = bytes.fromhex("02ab00000042")
    answers, _, calls = ctl_session([
        (CONTROLLER, protocol.config_set_request(1, ip=0x7F000001)),                   # loopback
        (CONTROLLER, protocol.config_set_request(2, ip=0xFFFFFFFF)),                   # broadcast
        (CONTROLLER, protocol.config_set_request(3, ip=0x00000000)),
        (CONTROLLER, protocol.config_set_request(4, mac=bytes.fromhex("01005e000001"))),  # group
        (CONTROLLER, protocol.config_set_request(5, mac=bytes(6))),
        (CONTROLLER, protocol.config_set_request(6, ip=0xC0A80133, mac=new_mac, payload=1024)),
        (CONTROLLER, protocol.config_set_request(6, ip=0xC0A80133, mac=new_mac, payload=1024)),  # again
        (CONTROLLER, protocol.identify_request(7)),
        (CONTROLLER, protocol.reboot_request(8, boots=3)),
        (CONTROLLER, protocol.identify_request(9)),
    ])
    assert [error_of(a, s) for a, s in zip(answers[:5], range(1, 6))] == [protocol.ERR_BAD_VALUE] * 5
    c = config_of(answers[5], 6)
    assert (c.ip, c.mac, c.payload) == (0xC0A80133, new_mac, 1024)
    assert answers[6] == answers[5]
    assert calls == ["net", "reboot"]     # The retransmission was answered, not run again.
    ident = protocol.parse_response(answers[7], expect_seq=7)[2]
    assert (ident.ip, ident.mac) == (0xC0A80133, new_mac)
    ident = protocol.parse_response(answers[9], expect_seq=9)[2]
    assert (ident.ip, ident.mac) == (0xC0A80132, bytes.fromhex("10e2d5000001"))   # The build's again.


def test_the_route_changes_like_the_addresses_and_the_gateway_stays_in_the_subnet(ctl_session):
    """The board at 192.168.1.50/24 without a gateway: a gateway outside the subnet, the board's
    own address, the subnet's broadcast, a netmask with holes, and an ip or netmask that would
    leave the gateway outside are refused and change nothing; a good gateway, and ip and gateway
    moved together, are taken after the answer, like an address change."""
    answers, _, calls = ctl_session([
        (CONTROLLER, protocol.config_set_request(1, gateway=0xC0A802FE)),              # another subnet
        (CONTROLLER, protocol.config_set_request(2, gateway=0xC0A80132)),              # the board itself
        (CONTROLLER, protocol.config_set_request(3, gateway=0xC0A801FF)),              # the broadcast
        (CONTROLLER, protocol.config_set_request(4, netmask=0xFF00FF00)),              # holes
        (CONTROLLER, protocol.config_set_request(5, gateway=0xC0A801FE)),              # 192.168.1.254
        (CONTROLLER, protocol.config_set_request(6, ip=0x0A000005)),                   # leaves it outside
        (CONTROLLER, protocol.config_set_request(7, netmask=0xFFFFFF80)),              # .254 outside .0/25
        (CONTROLLER, protocol.config_set_request(8, ip=0x0A000005, netmask=0xFFFF0000, gateway=0x0A000001)),
        (CONTROLLER, protocol.config_set_request(9, gateway=0)),
        (CONTROLLER, protocol.config_get_request(10)),
    ])
    refused = [1, 2, 3, 4, 6, 7]
    assert [error_of(answers[s - 1], s) for s in refused] == [protocol.ERR_BAD_VALUE] * len(refused)
    assert (config_of(answers[4], 5).netmask, config_of(answers[4], 5).gateway) == (0xFFFFFF00, 0xC0A801FE)
    c = config_of(answers[7], 8)
    assert (c.ip, c.netmask, c.gateway) == (0x0A000005, 0xFFFF0000, 0x0A000001)
    c = config_of(answers[9], 10)
    assert (c.ip, c.netmask, c.gateway) == (0x0A000005, 0xFFFF0000, 0)
    assert calls == ["net"] * 3


def test_config_set_builder_names_unknown_fields():
    with pytest.raises(ValueError, match="not colour"):
        protocol.config_set_request(1, colour=3)


# --- REBOOT -----------------------------------------------------------------------------------------

def test_reboot_reboots_once_even_when_retransmitted_after_the_reset(ctl_session):
    # The harness boots at count 3 (ctl_host.c) and reboots as main.c does after the answer.
    reboot = protocol.reboot_request(1, boots=3)
    answers, cnt, calls = ctl_session([
        (OTHER, protocol.claim_request(9)),
        (CONTROLLER, protocol.reboot_request(0, boots=3)),  # Another holds the board: refused.
        (OTHER, protocol.release_request(10)),
        (CONTROLLER, reboot),                       # Accepted: answered, then the reset.
        (CONTROLLER, reboot),                       # Its answer lost: sent again, after the reset.
        (CONTROLLER, protocol.reboot_request(2, boots=2)),  # A stale count: nothing to do.
        (CONTROLLER, protocol.status_request(3)),
    ])
    assert calls == ["reboot"]
    assert error_of(answers[1], 0) == protocol.ERR_NOT_CONTROLLER
    assert protocol.parse_response(answers[3], expect_seq=1)[2] == (1, 3)   # Rebooting, from boot 3.
    assert protocol.parse_response(answers[4], expect_seq=1)[2] == (0, 4)   # Already did: now boot 4.
    assert protocol.parse_response(answers[5], expect_seq=2)[2] == (0, 4)
    st = protocol.parse_response(answers[6], expect_seq=3)[2]
    assert (st.boots, st.reset_cause_name) == (4, "reboot")
    assert cnt["requests"] == 3  # Counted since the reboot (the counters start afresh).


def test_reboot_needs_a_signature_and_keeps_the_key_counter_across_the_reset(ctl_session):
    first = protocol.sign(protocol.stream_stop_request(1), KEY, 500)
    answers, cnt, calls = ctl_session([
        (CONTROLLER, protocol.reboot_request(2, boots=3)),                        # unsigned
        (CONTROLLER, first),
        (CONTROLLER, protocol.sign(protocol.reboot_request(3, boots=3), KEY, 501)),
        (OTHER, first),                       # Recorded before the reboot, replayed after it.
    ], key=KEY)
    assert error_of(answers[0], 2) == protocol.ERR_AUTH_REQUIRED
    assert calls == ["stream_stop", "reboot"]
    assert error_of(answers[3], 1) == protocol.ERR_AUTH_FAILED and cnt["auth_failed"] == 1


@pytest.mark.parametrize("text, error", [
    ("00" * 15, "16 to 64 bytes"), ("00" * 65, "16 to 64 bytes"), ("xyz" * 12, "hex digits"),
])
def test_key_files_are_checked(text, error):
    with pytest.raises(ValueError, match=error):
        protocol.parse_key(text)
    assert protocol.parse_key(" 00" * 16 + "\n") == bytes(16)


def test_hmac_sha256_matches_hashlib_hmac_and_rfc_4231(repo, tmp_path):
    import hashlib
    import hmac
    exe = tmp_path / "hmac_host"
    subprocess.run(["gcc", "-std=c99", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-fsanitize=address,undefined",
                    "-fno-sanitize-recover=all", f"-I{repo}/software/firmware/protocol",
                    str(repo / "software/firmware/protocol/hmac_sha256.c"), str(repo / "test/firmware/c/hmac_host.c"), "-o", str(exe)],
                   check=True)
    rfc4231 = [  # (key, data, HMAC-SHA256): test cases 1, 2, 3, 4, 6, 7
        ("0b" * 20, b"Hi There".hex(), "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
        (b"Jefe".hex(), b"what do ya want for nothing?".hex(),
         "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
        ("aa" * 20, "dd" * 50, "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"),
        ("0102030405060708090a0b0c0d0e0f10111213141516171819", "cd" * 50,
         "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"),
        ("aa" * 131, b"Test Using Larger Than Block-Size Key - Hash Key First".hex(),
         "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"),
        ("aa" * 131, b"This is a test using a larger than block-size key and a larger than block-size data. "
                     b"The key needs to be hashed before being used by the HMAC algorithm.".hex(),
         "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"),
    ]
    rng = random.Random(4231)
    cases = [(k, d) for k, d, _ in rfc4231]
    for _ in range(300):  # Every length around the block and padding boundaries, and beyond.
        n = rng.choice([rng.randrange(0, 200), rng.randrange(50, 70), rng.randrange(110, 135)])
        data = bytes(rng.randrange(256) for _ in range(n)).hex()
        key = "-" if rng.random() < 0.3 else bytes(rng.randrange(256) for _ in range(rng.randrange(1, 140))).hex()
        cases.append((key, data))
    r = subprocess.run([str(exe)], input="".join(f"{k} {d}\n" for k, d in cases), capture_output=True, text=True,
                       check=True)
    got = r.stdout.split()
    for (key, data), digest in zip(cases, got):
        want = (hashlib.sha256(bytes.fromhex(data)).hexdigest() if key == "-" else
                hmac.new(bytes.fromhex(key), bytes.fromhex(data), hashlib.sha256).hexdigest())
        assert digest == want, (key, data)
    assert got[:len(rfc4231)] == [h for _, _, h in rfc4231] and len(got) == len(cases)


@pytest.mark.parametrize("key", [None, bytes(range(200, 232))])
def test_the_key_header_the_firmware_includes_holds_the_key_and_is_private(tmp_path, key):
    from ethdaq.soc.build import write_key_header
    (tmp_path / "generated").mkdir()
    path = write_key_header(tmp_path / "generated", key)
    assert path.stat().st_mode & 0o077 == 0
    (tmp_path / "k.c").write_text('#include <stdio.h>\n#include <generated/ctl_key.h>\n'
                                  'int main(void) { for (unsigned i = 0; i < ETHDAQ_CTL_KEY_LEN; i++) '
                                  'printf("%02x", ethdaq_ctl_key[i]); printf(".%u\\n", ETHDAQ_CTL_KEY_LEN); }\n')
    subprocess.run(["gcc", "-Wall", "-Werror", f"-I{tmp_path}", str(tmp_path / "k.c"), "-o", str(tmp_path / "k")],
                   check=True)
    out = subprocess.run([str(tmp_path / "k")], capture_output=True, text=True, check=True).stdout
    assert out == f"{(key or b'').hex()}.{len(key or b'')}\n"


def test_cmocka_unit_tests_of_the_handler(ctl_host, repo, tmp_path):
    """test/firmware/c/ctl_unit.c: the handler's decisions one by one, with the board's operations mocked
    (cmocka; `make test` installs libcmocka-dev)."""
    if not Path("/usr/include/cmocka.h").exists():
        pytest.fail("cmocka is required (make test installs libcmocka-dev)")
    exe = tmp_path / "ctl_unit"
    gen = Path(ctl_host.exe).parent
    subprocess.run(["gcc", "-std=c99", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-fsanitize=address,undefined",
                    "-fno-sanitize-recover=all", f"-I{gen}", f"-I{repo}/software/firmware/protocol",
                    str(repo / "software/firmware/protocol/ctl.c"), str(repo / "software/firmware/protocol/hmac_sha256.c"),
                    str(repo / "test/firmware/c/ctl_unit.c"), "-lcmocka", "-o", str(exe)], check=True)
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[  PASSED  ] 10 test(s)." in r.stdout + r.stderr


def test_the_launch_frame_builder_makes_frames_scapy_and_its_checksum_agree_with():
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    frame = protocol.udp_frame(bytes.fromhex("020000000001"), bytes.fromhex("10e2d5000077"), 0xC0A84D32,
                               0xC0A84D01, 9100, 40000, b"trigger!")
    pkt = Ether(frame)
    assert (pkt.dst, pkt.src) == ("02:00:00:00:00:01", "10:e2:d5:00:00:77")
    assert (pkt[IP].src, pkt[IP].dst, pkt[IP].ttl, pkt[IP].flags) == ("192.168.77.50", "192.168.77.1", 64, "DF")
    assert (pkt[UDP].sport, pkt[UDP].dport, bytes(pkt[UDP].payload)) == (9100, 40000, b"trigger!")
    # scapy recomputes the checksum; it must be the one we sent.
    rebuilt = Ether(bytes(pkt.__class__(bytes(pkt))))
    del rebuilt[IP].chksum
    assert Ether(bytes(rebuilt))[IP].chksum == pkt[IP].chksum
    assert protocol.LAUNCH_FRAME_MIN <= len(frame) <= protocol.LAUNCH_FRAME_MAX
