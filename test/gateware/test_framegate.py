"""Frame gate (gateware/framegate.py) in Migen simulation: frames of random lengths at line rate,
some flagged bad, some too long, against a consumer that stalls at random: exactly the good
frames come out, whole and in order, and every other frame is counted in its class. Then the
upstream LiteEth behaviour the gate exists for, pinned: LiteEth's IP core answers a ping whose
FCS is bad; behind the gate it does not (scapy builds the frames, zlib the FCS). The first tests
run at 8 bits (bytes) and at 64 (beats with last_be, as LiteEth's 64-bit MAC datapath)."""

import random

import pytest
from migen import *
from migen.sim import run_simulation

from liteeth.core import LiteEthIPCore
from scapy.layers.inet import ICMP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from ethdaq.gateware.framegate import FrameGate
from ipcore_helpers import BOARD_IP, BOARD_MAC, IPCoreBench, exchange_ping, ping_request


@pytest.fixture(params=[8, 64])
def dw(request):
    return request.param


def gate_sim(frames, ready_prob, depth=2048, max_frame=1536, gap=12, seed=1, dw=8):
    dut = FrameGate(depth=depth, max_frame=max_frame, dw=dw)
    rng = random.Random(seed)
    result = {"out": [], "cur": []}
    state = {"in": False}
    n = dw//8

    def feed():
        for data, error in frames:
            for i in range(0, len(data), n):
                chunk, last = data[i:i + n], i + n >= len(data)
                yield dut.sink.valid.eq(1)
                yield dut.sink.data.eq(int.from_bytes(chunk + bytes(n - len(chunk)), "little"))
                yield dut.sink.last.eq(last)
                yield dut.sink.last_be.eq(1 << (len(chunk) - 1) if last else 0)
                yield dut.sink.error.eq((2**n - 1) if error and last else 0)
                yield
            yield dut.sink.valid.eq(0)
            yield dut.sink.error.eq(0)
            for _ in range(max(1, gap//n)):
                yield
        state["in"] = True

    for name in ("passed", "dropped_error", "dropped_full", "dropped_oversize"):
        result[name] = 0

    def drain():
        idle = 0
        while idle < 3*depth:
            ready = int(rng.random() < ready_prob)
            yield dut.source.ready.eq(ready)
            yield
            # The data FIFO takes every admitted word (no full check of its own): the gate's room.
            assert not ((yield dut.data_fifo.sink.valid) and (yield dut.data_fifo.full))
            for name, ev in (("dropped_error", dut.ev_error), ("dropped_full", dut.ev_full),
                             ("dropped_oversize", dut.ev_oversize)):
                result[name] += yield ev
            if ready and (yield dut.source.valid):
                idle = 0
                word = (yield dut.source.data).to_bytes(n, "little")
                if (yield dut.source.last):
                    word = word[:(yield dut.source.last_be).bit_length()]
                result["cur"] += word
                if (yield dut.source.last):
                    result["out"].append(bytes(result["cur"]))
                    result["passed"] += 1
                    result["cur"] = []
            elif state["in"]:
                idle += 1

    run_simulation(dut, [feed(), drain()])
    return result


def random_frames(n, seed, max_len=1700, error_rate=0.2):
    rng = random.Random(seed)
    frames = []
    for k in range(n):
        length = rng.choice([60, 64, rng.randint(60, max_len), 1536, 1537])
        data = bytes([k & 0xff]) + bytes(rng.getrandbits(8) for _ in range(length - 1))
        frames.append((data, rng.random() < error_rate))
    return frames


def test_a_free_flowing_consumer_gets_every_good_frame_whole_and_in_order(dw):
    frames = random_frames(24, seed=2)
    r = gate_sim(frames, ready_prob=1.0, dw=dw)
    good = [d for d, e in frames if not e and len(d) <= 1536]
    assert r["out"] == good
    assert r["passed"] == len(good) and r["dropped_full"] == 0
    assert r["dropped_error"] == sum(1 for d, e in frames if e and len(d) <= 1536)
    assert r["dropped_oversize"] == sum(1 for d, e in frames if len(d) > 1536)


def test_a_stalling_consumer_loses_whole_frames_only_and_counts_them(dw):
    frames = random_frames(40, seed=3, max_len=400, error_rate=0.1)
    r = gate_sim(frames, ready_prob=0.15 if dw == 8 else 0.02, dw=dw)
    good = [d for d, e in frames if not e]
    assert r["dropped_full"] > 0                                   # The buffer did fill.
    # What came out is an in-order subsequence of the good frames, each one whole.
    it = iter(good)
    assert all(any(f == g for g in it) for f in r["out"])
    assert r["passed"] == len(r["out"])
    assert r["passed"] + r["dropped_full"] + r["dropped_error"] + r["dropped_oversize"] == len(frames)


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError, match="power of two"):
        FrameGate(depth=1000)
    with pytest.raises(ValueError, match="max_frame"):
        FrameGate(depth=1024, max_frame=2000)
    with pytest.raises(ValueError, match="a multiple of 8 bytes at dw=64"):
        FrameGate(max_frame=1514, dw=64)


# --- LiteEth answers a ping with a bad FCS; behind the gate it does not ----------------------------

class IPCoreDut(IPCoreBench):
    def __init__(self, with_gate):
        IPCoreBench.__init__(self)
        self.core = LiteEthIPCore(self.phy, BOARD_MAC, BOARD_IP, clk_freq=100e6, dw=8)
        if with_gate:
            from liteeth.mac.crc import LiteEthMACCRC32Checker
            pipeline = self.core.mac.core.rx_datapath.pipeline
            crc = next(i for i, m in enumerate(pipeline) if isinstance(m, LiteEthMACCRC32Checker))
            self.gate = ClockDomainsRenamer("eth_rx")(FrameGate())
            pipeline.insert(crc + 1, self.gate)


def pings_answered(with_gate, fcs_flip):
    # A reply comes after about 500 cycles.
    sent = exchange_ping(IPCoreDut(with_gate), ping_request(), fcs_flip=fcs_flip, cycles=1500)
    replies = [Ether(f[8:-4]) for f in sent if len(f) > 12]
    return [r for r in replies if r.haslayer(ICMP) and r[ICMP].type == 0]


def test_upstream_liteeth_answers_a_ping_whose_fcs_is_bad():
    assert len(pings_answered(with_gate=False, fcs_flip=0x100)) == 1


def test_behind_the_gate_only_the_good_ping_is_answered():
    good = pings_answered(with_gate=True, fcs_flip=0)
    assert len(good) == 1 and good[0][Raw].load == b"ethdaq!"
    assert pings_answered(with_gate=True, fcs_flip=0x100) == []
