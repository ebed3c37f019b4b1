"""FrameFIFO (gateware/framefifo.py): store-and-forward from sys into eth_tx.

With LiteEth's own MAC core (8 bits, datapath in eth_tx) and sys at half the PHY's clock, as on
the ECP5 boards (60 against 125 MHz): upstream, TX_EN (`valid` at the PHY) drops inside a frame;
with the DAQSoC's crossing (macpipeline.replace_tx_cdc) every frame leaves without a gap, with
the preamble, the bytes sent and an FCS that zlib accepts. And the FIFO alone: frames of every
length through random gaps and stalls, at both clock ratios, intact; a frame longer than the
FIFO gets through (sent as it comes) and is counted once."""

import random
import zlib

import pytest

from migen import ClockDomain, run_simulation
from migen.sim import passive

from litex.gen import LiteXModule

from liteeth.mac.core import LiteEthMACCore

from ethdaq.gateware.framefifo import FrameFIFO
from ethdaq.gateware.macpipeline import insert_tx_buffer, replace_tx_cdc
from ethdaq.gateware.txpath import MACPHY

from stream_helpers import PREAMBLE, send_frames

# Clock periods in simulator units: sys at half the PHY's clock (60 vs 125 MHz on the ECP5
# boards), with the edges apart.
SLOW, FAST = (16, 3), (8, 0)


class _MAC(LiteXModule):
    def __init__(self, ours):
        self.cd_sys    = ClockDomain("sys")
        self.cd_eth_tx = ClockDomain("eth_tx")
        self.cd_eth_rx = ClockDomain("eth_rx")
        self.phy  = MACPHY()
        self.core = LiteEthMACCore(self.phy, dw=8, with_sys_datapath=False)
        if ours:
            self.buf = insert_tx_buffer(self.core)
            self.cdc = replace_tx_cdc(self.core)


def _mac_line(ours, frames):
    """The PHY's input, cycle by cycle from the first valid byte: (valid, data, last)."""
    dut = _MAC(ours)
    line = []
    total = sum(len(f) for f in frames)

    def phy():
        yield dut.phy.sink.ready.eq(1)
        started, ends = False, 0
        for _ in range(4 * total + 400):
            yield
            v = yield dut.phy.sink.valid
            started |= bool(v)
            if started:
                line.append((v, (yield dut.phy.sink.data), (yield dut.phy.sink.last)))
                ends += v and (yield dut.phy.sink.last)
            if ends == len(frames):
                return

    run_simulation(dut, {"sys": [send_frames(dut.core.sink, frames)], "eth_tx": [phy()]},
                   clocks={"sys": SLOW, "eth_tx": FAST, "eth_rx": FAST})
    return line


def _frames_on_line(line):
    """Split the PHY's input into frames at `last`; each with whether `valid` dropped inside."""
    out, cur, gap = [], None, False
    for v, d, last in line:
        if not v:
            gap |= cur is not None
            continue
        if cur is None:
            cur, gap = bytearray(), False
        cur.append(d)
        if last:
            out.append((bytes(cur), gap))
            cur = None
    return out


def _mac_frames(seed=3):
    rng = random.Random(seed)
    sizes = [60, 64, 100, 590, 1514, 61, 300]
    return [bytes(rng.randrange(256) for _ in range(n)) for n in sizes]


def test_upstream_liteeth_drops_tx_en_inside_frames_when_sys_is_slower():
    """LiteEth issue 219, on its own MAC core: 8 bits a sys cycle at half the PHY's clock run its
    32-entry crossing empty, and the preamble inserter passes the gaps to the PHY."""
    frames = _mac_frames()[:2]
    got = _frames_on_line(_mac_line(False, frames))
    assert got and all(gap for _, gap in got)


def test_the_daqsoc_mac_crossing_sends_every_frame_whole_and_without_a_gap():
    frames = _mac_frames()
    got = _frames_on_line(_mac_line(True, frames))
    assert len(got) == len(frames)
    for f, (wire, gap) in zip(frames, got):
        assert not gap, "TX_EN dropped inside a frame"
        assert wire[:8] == PREAMBLE
        body = wire[8:]
        assert body[:-4] == f                               # >= 60 bytes: no padding
        assert zlib.crc32(body[:-4]).to_bytes(4, "little") == body[-4:]


def _fifo_run(frames, depth, wclk, rclk, in_gaps, out_stalls, seed=1):
    rng = random.Random(seed)

    class Dut(LiteXModule):
        def __init__(self):
            self.cd_sys    = ClockDomain("sys")
            self.cd_eth_tx = ClockDomain("eth_tx")
            self.fifo = FrameFIFO(depth, cd_write="sys", cd_read="eth_tx")

    dut = Dut()
    got = {"frames": [], "gaps": 0, "oversize": 0}
    total = sum(len(f) for f in frames)

    def reader():
        src, cur, count = dut.fifo.source, bytearray(), 0
        for _ in range(40 * total + 500):
            ready = int(rng.random() >= out_stalls)
            yield src.ready.eq(ready)
            yield
            valid = yield src.valid
            if cur and not valid:
                got["gaps"] += 1
            if ready and valid:
                cur.append((yield src.data))
                count += 1
                if (yield src.last):
                    got["frames"].append(bytes(cur))
                    cur = bytearray()
            if count == total:
                return

    @passive
    def oversize():
        while True:
            yield
            got["oversize"] += yield dut.fifo.oversize

    wrng = random.Random(seed + 1)
    run_simulation(dut, {"sys": [send_frames(dut.fifo.sink, frames, wrng, in_gaps), oversize()], "eth_tx": [reader()]},
                   clocks={"sys": wclk, "eth_tx": rclk})
    return got


def _random_frames(depth, n=40, seed=5):
    rng = random.Random(seed)
    sizes = [1, 2, 3, depth - 2, depth - 3] + [rng.choice([rng.randrange(1, 40), rng.randrange(40, depth - 2)])
                                                for _ in range(n)]
    return [bytes(rng.randrange(256) for _ in range(s)) for s in sizes]


@pytest.mark.parametrize("wclk,rclk", [(SLOW, FAST), (FAST, SLOW), (FAST, (8, 5))], ids=["slow-writer", "slow-reader", "same-rate"])
def test_frames_of_every_length_pass_whole_and_leave_without_a_gap(wclk, rclk):
    frames = _random_frames(64)
    got = _fifo_run(frames, 64, wclk, rclk, in_gaps=0.3, out_stalls=0.0)
    assert got["frames"] == frames
    assert got["gaps"] == 0, "valid dropped inside a frame with the reader always ready"
    assert got["oversize"] == 0


def test_frames_pass_whole_under_gaps_and_stalls():
    frames = _random_frames(64, seed=9)
    got = _fifo_run(frames, 64, SLOW, FAST, in_gaps=0.4, out_stalls=0.3)
    assert got["frames"] == frames
    assert got["oversize"] == 0


def test_a_frame_longer_than_the_fifo_gets_through_and_is_counted_once():
    """It cannot be wholly in: released when it fills the FIFO, sent as it comes; the frames
    after it are held back until whole again."""
    rng = random.Random(2)
    frames = [bytes(rng.randrange(256) for _ in range(n)) for n in (10, 200, 62, 130, 5)]
    got = _fifo_run(frames, 64, SLOW, FAST, in_gaps=0.0, out_stalls=0.0)
    assert got["frames"] == frames
    assert got["oversize"] == 2
    frames = [frames[0], frames[2], frames[4]]   # Those that fit: no gap.
    got = _fifo_run(frames, 64, SLOW, FAST, in_gaps=0.0, out_stalls=0.0)
    assert got["gaps"] == 0 and got["oversize"] == 0


def test_depth_below_sixteen_is_refused():
    with pytest.raises(ValueError, match="at least 16"):
        FrameFIFO(8)
