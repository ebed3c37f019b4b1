"""Streamer through the canned-header transmit path at the GMII pins, cycle-accurate (Verilator, bench/gmii.py).
Frames are decoded by scapy (an independent decoder) and checked for FCS, IP checksum, UDP
length and DAQ header; throughput and inter-frame gaps against the theoretical limit."""

import math
import zlib

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from bench import gmii, linerate
from conftest import REPO, tshark_frame_checks
from ethdaq.gateware.emulator import MODE_PULSE
from ethdaq.wire import daqformat

PREAMBLE = b"\x55"*7 + b"\xd5"


@pytest.fixture(scope="module")
def exe():
    return gmii.build_verilator(REPO / "build" / "test-bench")


def decode(frame):
    assert frame[:8] == PREAMBLE
    body, fcs = frame[8:-4], frame[-4:]
    assert zlib.crc32(body).to_bytes(4, "little") == fcs, "bad FCS"
    pkt = Ether(body)
    assert IP in pkt and UDP in pkt
    return pkt


@pytest.mark.parametrize("payload", [64, 1472, 8972])
def test_back_to_back_frames_at_the_theoretical_udp_limit(exe, payload):
    mib_s, gaps, r = linerate.throughput(exe, payload, frames=24)
    assert gaps == [gmii.IFG], f"inter-frame gaps {gaps}, expected exactly 12 byte times"
    theory = linerate.theoretical_mib_s(payload)
    assert abs(mib_s - theory)/theory < 0.001, f"{mib_s:.3f} MiB/s vs {theory:.3f} theoretical"
    # Every data frame is a well-formed Ethernet/IPv4/UDP frame carrying one DAQ datagram.
    seqs = {}
    for frame in r["frames"][1:]:
        pkt = decode(frame)
        udp = pkt[UDP]
        assert udp.dport == 5000 and udp.sport == 5000 and udp.len == 8 + payload
        data = bytes(udp.payload)
        h = daqformat.unpack_header(data)
        assert h.sample_count == (payload - 40)//2
        seqs.setdefault(h.stream_id, []).append(h.seq)
    assert sorted(seqs) == [0, 1, 2, 3]
    for s in seqs.values():
        assert s == list(range(s[0], s[0] + len(s)))


def test_ip_header_checksum_is_valid(exe):
    r = gmii.measure(exe, 256, frames=3, enable=0b1)
    for frame in r["frames"][1:]:
        raw = Ether(frame[8:-4])[IP]
        header = bytes(raw)[:raw.ihl*4]
        total = sum(int.from_bytes(header[i:i + 2], "big") for i in range(0, len(header), 2))
        while total >> 16:
            total = (total & 0xffff) + (total >> 16)
        assert total == 0xffff, "IPv4 header checksum does not verify"


@pytest.mark.parametrize("payload", [64, 256, 1024])
def test_latency_from_datagram_complete_to_preamble_is_at_most_100_ns(exe, payload):
    """From the cycle the datagram's last sample is accepted at the streamer input to tx_en at
    the GMII pins, across the channel buffer's clock crossing: at most 100 ns."""
    lo, hi = linerate.latency(exe, payload)
    assert lo == hi, "latency must not depend on anything but the pipeline"
    assert hi*8 <= 100, f"{hi} cycles = {hi*8} ns"


def test_the_stages_latency_in_migen_is_the_latency_verilator_measures_at_the_pins(exe):
    """Two simulators of one design: Migen's stage by stage (bench/gmii.stage_cycles, which
    docs/results.md itemises) and Verilator's at the pins agree, and every stage is no earlier
    than the one before it."""
    stages = gmii.stage_cycles(256)
    cycles = [c for _, c in stages]
    assert cycles == sorted(cycles) and cycles[0] > 0, stages
    lo, hi = linerate.latency(exe, 256)
    assert cycles[-1] == lo == hi, (stages, lo, hi)


def test_tshark_decodes_every_streamed_frame_with_valid_fcs_and_ip_checksum(exe, tmp_path):
    """tshark (an independent dissector) on the exact bytes from the GMII pins, FCS included."""
    r = gmii.measure(exe, 1472, frames=8, enable=0b1111)
    rows = tshark_frame_checks(r["frames"], tmp_path / "gmii.pcap")
    assert len(rows) == len(r["frames"]) >= 9
    assert all(row[1] == "1" for row in rows), rows           # 1 = Good FCS, ARP included.
    udp = [row for row in rows if "udp" in row[0]]
    assert len(udp) == len(rows) - 1
    assert all(row[2] == "1" and row[3] == str(8 + 1472) for row in udp), udp


# The idle flush at the pins --------------------------------------------------------------------

FLUSH = 2000                   # Cycles (16 µs at 125 MHz).
# From a flushed datagram's closing to its first preamble byte: the transmit path's latency
# (test_latency_from_datagram_complete_to_preamble_is_at_most_100_ns) and the header's fetch.
PIN_PIPELINE = 16


@pytest.mark.parametrize("rate", [1e-4, 1e-3, 1e-2])
def test_pulse_trains_leave_within_the_flush_time_at_the_pins(exe, rate):
    """The emulator's Poisson pulse train on one channel, at rates from one pulse per 80 µs to
    one per 0.8 µs, with a 16 µs flush: every sample reaches the pins in a datagram that starts
    at most flush + 1 + PIN_PIPELINE cycles after the datagram's last sample (or right after the
    frame before it, which it queued behind); none is lost; datagrams fill when samples come
    closer together than the flush time."""
    cycles = 400_000
    r = gmii.measure(exe, 1472, frames=0, enable=0b1, rate=int(rate*2**32), max_cycles=cycles,
                     mode=MODE_PULSE, flush=FLUSH - 1)
    accepts = [c for c, mask in r["accepts"]]
    assert all(mask == 1 for c, mask in r["accepts"])
    k, flushed, full, prev_end = 0, 0, 0, None
    for frame, start, end in zip(r["frames"][1:], r["starts"][1:], r["ends"][1:]):
        pkt = decode(frame)
        h = daqformat.unpack_header(bytes(pkt[UDP].payload))
        assert h.seq == flushed + full and h.dropped == 0 and h.sample_count >= 1
        k += h.sample_count
        wait = start - accepts[k - 1]
        if h.flags & daqformat.FLAG_FLUSH:
            flushed += 1
            assert wait >= FLUSH, "a flushed datagram waits the flush time, no less"
            assert wait <= FLUSH + PIN_PIPELINE or start - prev_end == gmii.IFG, \
                f"datagram {h.seq} left {wait} cycles after its last sample"
        else:
            full += 1
            assert h.sample_count == (1472 - 40)//2
        prev_end = end
    # What has not left is one datagram still filling (its samples within the flush time of each
    # other) or waiting for its flush time or its turn on the wire.
    rest = accepts[k:]
    assert len(rest) < (1472 - 40)//2
    assert all(b - a < FLUSH for a, b in zip(rest, rest[1:]))
    assert not rest or rest[-1] > cycles - FLUSH - 1500
    expected = cycles*rate
    assert abs(len(accepts) - expected) < 5*expected**0.5 + 5
    if rate <= 1e-3:
        # A pulse ends a datagram when the next comes more than the flush time later.
        assert flushed >= 0.5*len(accepts)*math.exp(-rate*FLUSH) and full == 0
    else:
        assert full >= 3 and flushed <= 3
