"""MACTransmitter (gateware/mactx.py) against zlib's CRC-32 and the 802.3 frame layout (seven
0x55, 0xD5, the bytes, zeros up to 60, the FCS), and against LiteEth's own padding, FCS and
preamble inserters in a row (as its MAC core builds them): the same bytes on the line, frame for
frame, under gaps on the input and random stalls on the output; and in LiteEth's MAC core through
macpipeline.replace_tx_framing."""

import random

import pytest

from migen import ClockDomain, run_simulation

from litex.gen import LiteXModule
from litex.soc.interconnect import stream
from litex.soc.interconnect.stream import BufferizeEndpoints, DIR_SINK

from liteeth.common import eth_phy_description
from liteeth.mac.core import LiteEthMACCore
from liteeth.mac.crc import LiteEthMACCRC32Inserter
from liteeth.mac.padding import LiteEthMACPaddingInserter
from liteeth.mac.preamble import LiteEthMACPreambleInserter

from ethdaq.gateware.mactx import MACTransmitter
from ethdaq.gateware.macpipeline import insert_tx_buffer, replace_tx_cdc, replace_tx_framing
from ethdaq.gateware.txpath import MACPHY

from stream_helpers import send_frames, wire


class _LiteEthChain(LiteXModule):
    """LiteEth's three inserters as LiteEthMACCore builds them for 8 bits."""
    def __init__(self):
        pad = LiteEthMACPaddingInserter(8, 60)
        crc = BufferizeEndpoints({"sink": DIR_SINK})(LiteEthMACCRC32Inserter(eth_phy_description(8)))
        pre = LiteEthMACPreambleInserter(8)
        self.submodules += pad, crc, pre, stream.Pipeline(pad, crc, pre)
        self.sink, self.source = pad.sink, pre.source


def run(make, frames, in_gaps=0.0, out_stalls=0.0, seed=1):
    """Frames out of `make()` (sink/source in sys), split at `last`; each with whether `valid`
    dropped inside it while the output was ready."""
    class Dut(LiteXModule):
        def __init__(self):
            self.cd_sys = ClockDomain("sys")
            self.tx = make()

    dut = Dut()
    rng = random.Random(seed)
    out = []
    expect = len(frames)

    def reader():
        src, cur, gap = dut.tx.source, None, False
        for _ in range(4 * sum(max(len(f), 60) + 12 for f in frames) * (1 + int(10 * out_stalls)) + 200):
            ready = int(rng.random() >= out_stalls)
            yield src.ready.eq(ready)
            yield
            valid = yield src.valid
            if cur is not None and not valid:
                gap = True
            if valid and ready:
                if cur is None:
                    cur, gap = bytearray(), False
                cur.append((yield src.data))
                if (yield src.last):
                    out.append((bytes(cur), gap))
                    cur = None
                    if len(out) == expect:
                        return

    run_simulation(dut, [send_frames(dut.tx.sink, frames, random.Random(seed + 1), in_gaps), reader()])
    return out


def frames_of_every_length(seed=4):
    rng = random.Random(seed)
    sizes = list(range(1, 66)) + [100, 1514, rng.randrange(66, 400)]
    rng.shuffle(sizes)
    return [bytes(rng.randrange(256) for _ in range(n)) for n in sizes]


def test_every_frame_leaves_padded_with_its_fcs_and_without_a_gap():
    frames = frames_of_every_length()
    got = run(MACTransmitter, frames, in_gaps=0.3)   # Gaps between frames only matter here.
    assert [w for w, _ in got] == [wire(f) for f in frames]


def test_a_steady_input_gives_a_steady_output():
    frames = frames_of_every_length(seed=5)[:20]
    got = run(MACTransmitter, frames)
    assert not any(gap for _, gap in got)


@pytest.mark.parametrize("in_gaps,out_stalls", [(0.3, 0.0), (0.0, 0.3), (0.4, 0.4)])
def test_the_same_bytes_as_liteeths_inserters_under_gaps_and_stalls(in_gaps, out_stalls):
    frames = frames_of_every_length(seed=6)
    ours   = run(MACTransmitter, frames, in_gaps, out_stalls)
    theirs = run(_LiteEthChain, frames, in_gaps, out_stalls)
    assert [w for w, _ in ours] == [w for w, _ in theirs] == [wire(f) for f in frames]


def test_without_padding_short_frames_stay_short():
    frames = [bytes([i] * n) for i, n in enumerate((1, 14, 59, 60, 61))]
    got = run(lambda: MACTransmitter(with_padding=False), frames)
    assert [w for w, _ in got] == [wire(f, padding=False) for f in frames]


def test_replace_tx_framing_puts_one_transmitter_in_liteeths_mac_core():
    core = LiteEthMACCore(MACPHY(), dw=8, with_sys_datapath=False)
    insert_tx_buffer(core)
    replace_tx_cdc(core)
    tx = replace_tx_framing(core)
    kinds = (LiteEthMACPaddingInserter, LiteEthMACCRC32Inserter, LiteEthMACPreambleInserter)
    pipeline = core.tx_datapath.pipeline
    assert pipeline[-2] is tx and isinstance(tx, MACTransmitter)
    assert not any(isinstance(m, kinds) for m in pipeline)
    assert not any(isinstance(m, kinds) for _, m in core.tx_datapath._submodules)
    assert any(m is tx for _, m in core.tx_datapath._submodules)
    with pytest.raises(ValueError, match="padding, FCS and preamble"):
        replace_tx_framing(core)
