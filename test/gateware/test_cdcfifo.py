"""LevelFIFO's crossing (gateware/cdcfifo.py): the two-stage gray decoder against the gray code
itself, for every code of widths 1 to 11; and the FIFO across two clocks: every entry through
in order, the writer stopped at exactly `depth` entries when the reader stalls (the decoded
read pointer is late, never wrong), and `level` back to exactly 0 once everything is read."""

import random

import pytest

from migen import ClockDomain, Module, run_simulation
from migen.sim import passive

from ethdaq.gateware.cdcfifo import GrayDecoder2, LevelFIFO


def gray(n):
    return n ^ (n >> 1)


@pytest.mark.parametrize("width", range(1, 12))
def test_gray_decoder_decodes_every_code_two_cycles_later(width):
    dut = GrayDecoder2(width)
    codes = list(range(2**width))
    random.Random(width).shuffle(codes)   # Not only neighbours: every code from every other.
    seen = []

    def bench():
        for n in codes + [0, 0]:
            yield dut.i.eq(gray(n))
            yield
            seen.append((yield dut.o))
    run_simulation(dut, bench())
    # `o` in the cycle after i's second register edge: seen[t] is the decode of codes[t - 2].
    assert seen[2:len(codes) + 2] == codes


class _Crossing(Module):
    def __init__(self, depth, buffered):
        self.clock_domains.cd_sys = ClockDomain("sys")
        self.clock_domains.cd_rd  = ClockDomain("rd")
        self.submodules.fifo = LevelFIFO([("data", 16)], depth, cd_write="sys", cd_read="rd",
                                         buffered=buffered, framing=False)


@pytest.mark.parametrize("buffered", [False, True])
def test_level_fifo_across_clocks_fills_to_depth_and_drains_to_zero(buffered):
    depth = 16
    dut = _Crossing(depth, buffered)
    fifo = dut.fifo
    out, state = [], {"stall": True, "accepted": 0, "level_after_drain": None}
    rng = random.Random(3)

    def writer():
        n = 0
        for _ in range(400):   # The reader is stalled: the writer fills the FIFO and stops.
            yield fifo.sink.valid.eq(1)
            yield fifo.sink.data.eq(n)
            yield
            if (yield fifo.sink.ready):
                n += 1
        state["accepted"] = n
        state["stall"] = False
        for _ in range(2000):
            valid = rng.random() < 0.7
            yield fifo.sink.valid.eq(valid)
            yield fifo.sink.data.eq(n)
            yield
            if valid and (yield fifo.sink.ready):
                n += 1
        yield fifo.sink.valid.eq(0)
        state["written"] = n
        for _ in range(200):
            yield
        state["level_after_drain"] = (yield fifo.level)

    @passive
    def reader():
        while state["stall"]:
            yield
        while True:
            ready = rng.random() < 0.8
            yield fifo.source.ready.eq(ready)
            yield
            if ready and (yield fifo.source.valid):
                out.append((yield fifo.source.data))

    run_simulation(dut, {"sys": [writer()], "rd": [reader()]}, clocks={"sys": 10, "rd": (13, 4)})
    # Buffered, the two read stages hold two more entries than the RAM.
    assert state["accepted"] == depth + (2 if buffered else 0)
    assert out == list(range(state["written"]))
    assert state["level_after_drain"] == 0


@pytest.mark.parametrize("wclk,rclk", [(40, 8), (40, 10), (8, 8), (8, 40)],
                         ids=["reader-5x", "reader-4x", "same", "reader-slower"])
def test_buffered_fifo_with_reader_faster_gives_every_entry_whole(wclk, rclk):
    """The PTP record FIFOs of a 100 Mb/s board: written at the PHY's 25 MHz, read at sys
    (100 or 125 MHz). Without `reader_faster` the reader saw the write pointer before the
    registered RAM write landed and read zeros (every record at 40/8 ns); with it, every entry
    arrives whole and in order at any ratio."""
    class D(Module):
        def __init__(self):
            self.clock_domains.cd_sys = ClockDomain("sys")
            self.clock_domains.cd_w = ClockDomain("w")
            self.submodules.fifo = LevelFIFO([("a", 16), ("b", 8)], 8, cd_write="w", cd_read="sys",
                                             buffered=True, framing=False, with_dp16kd=False, reader_faster=True)
    d, got = D(), []
    sent = [(0x1000 + 37*k & 0xffff, k) for k in range(12)]

    def write():
        for _ in range(5):
            yield
        for a, b in sent:
            yield d.fifo.sink.valid.eq(1)
            yield d.fifo.sink.a.eq(a)
            yield d.fifo.sink.b.eq(b)
            yield
            while not (yield d.fifo.sink.ready):
                yield
            yield d.fifo.sink.valid.eq(0)
            for _ in range(random.Random(b).randrange(3)):
                yield

    def read():
        for _ in range(60*wclk):
            if (yield d.fifo.source.valid):
                got.append(((yield d.fifo.source.a), (yield d.fifo.source.b)))
                yield d.fifo.source.ready.eq(1)
                yield
                yield d.fifo.source.ready.eq(0)
            yield

    run_simulation(d, {"w": [write()], "sys": [read()]}, clocks={"w": wclk, "sys": rclk})
    assert got == sent
