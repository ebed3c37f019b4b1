"""Control protocol: the firmware's C parser (built for the host, with sanitizers) against the
Python definition in ethdaq.host.protocol, byte for byte, plus malformed and random input."""

import random
import re
import shutil
import struct
import subprocess

import pytest

from ethdaq.host import protocol

IDENTITY = protocol.Identity(mac=bytes([0x10, 0xe2, 0xd5, 0, 0, 1]), ip=0xC0A80132, ctl_port=7000,
    sys_clk_hz=125_000_000, eth_dw=8, nchannels=4, sample_bits=16, max_payload=8972,
    board="sim", build_id="0123456789ab", ident="ethdaq sim test")


@pytest.fixture(scope="module")
def ctl_host(tmp_path_factory, repo):
    if shutil.which("gcc") is None:
        pytest.fail("gcc is required (make test installs it)")
    d = tmp_path_factory.mktemp("ctl")
    (d / "generated").mkdir()
    (d / "generated" / "ctl_protocol.h").write_text(protocol.c_header())
    exe = d / "ctl_host"
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-g", "-fsanitize=address,undefined",
                    "-fno-sanitize-recover=all", f"-I{d}", f"-I{repo}/software/firmware",
                    str(repo / "software/firmware/ctl.c"), str(repo / "test/c/ctl_host.c"), "-o", str(exe)],
                   check=True)

    def run(request, cap=2048, src_ip=0xC0A80164, stub_error=0):
        r = subprocess.run([str(exe), str(cap), str(src_ip), str(stub_error)], input=request,
                           capture_output=True, check=True)
        lines = r.stderr.decode().splitlines()
        counters = dict((k, int(v)) for k, v in re.findall(r"(\w+)=(-?\d+)", lines[-1]))
        counters["calls"] = [dict((k, v) for k, v in re.findall(r"(\w+)=(\S+)", line)) for line in lines[:-1]]
        return r.stdout, counters
    return run


def test_identify_response_matches_python_definition_byte_for_byte(ctl_host):
    for seq in (0, 1, 0xDEADBEEF, 0xFFFFFFFF):
        rsp, cnt = ctl_host(protocol.identify_request(seq))
        assert rsp == protocol.pack_identify_response(seq, IDENTITY)
        assert cnt["requests"] == 1
        msg_type, got_seq, ident = protocol.parse_response(rsp, expect_seq=seq)
        assert (msg_type, got_seq, ident) == (protocol.MSG_IDENTIFY_RSP, seq, IDENTITY)


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
    with pytest.raises(protocol.ProtocolError, match="trailing"):
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
