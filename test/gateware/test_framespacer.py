"""FrameSpacer (gateware/framespacer.py): alone, against its own contract; and in front of LiteEth's
64-bit FCS checker as the 10G board builds them (soc/daqsoc.py), in Verilator, with frames put on
the XGMII pins back to back by cocotbext-eth's XgmiiSource (an independent XGMII driver that adds
the preamble and FCS) and crossing into a slower sys clock. Without the spacer LiteEth's checker
corrupts a frame that follows one whose last word holds 5 to 8 bytes; with it every frame comes
out whole and unflagged."""

import os
import random
import subprocess
import sys

import pytest
from migen import ClockDomain, ClockDomainsRenamer, Record, run_simulation
from migen.sim import passive

from litex.gen import LiteXModule
from litex.soc.interconnect import stream
from litex.soc.interconnect.stream import DIR_SINK, BufferizeEndpoints

from liteeth.common import eth_phy_description
from liteeth.mac.crc import LiteEthMACCRC32Checker
from liteeth.mac.preamble import LiteEthMACPreambleChecker
from liteeth.phy.xgmii import LiteEthPHYXGMIIRX

from bench.verilate import verilog_text
from conftest import REPO
from ethdaq.gateware.framespacer import FrameSpacer
from test_xgmiitx_cocotb import RUNNER


class RXChainTop(LiteXModule):
    """LiteEth's XGMII receiver (eth_rx) -> its receive crossing into sys -> preamble checker ->
    (FrameSpacer) -> FCS checker, as LiteEthMACCore builds them with_sys_datapath at 64 bits.
    Ports: eth_rx_clk/rst, sys_clk/rst, rx_data, rx_ctl, source_* (always ready)."""
    def __init__(self, with_spacer):
        self.cd_sys, self.cd_eth_rx = ClockDomain("sys"), ClockDomain("eth_rx")
        self.pads = Record([("rx_ctl", 8), ("rx_data", 64)])
        self.phy  = ClockDomainsRenamer("eth_rx")(LiteEthPHYXGMIIRX(self.pads, 64))
        self.cdc  = stream.ClockDomainCrossing(eth_phy_description(64), cd_from="eth_rx", cd_to="sys", depth=256)
        self.preamble = LiteEthMACPreambleChecker(64)
        self.crc  = BufferizeEndpoints({"sink": DIR_SINK})(LiteEthMACCRC32Checker(eth_phy_description(64)))
        chain = [self.phy, self.cdc, self.preamble]
        if with_spacer:
            self.spacer = FrameSpacer(eth_phy_description(64))
            chain.append(self.spacer)
        chain.append(self.crc)
        self.comb += [a.source.connect(b.sink) for a, b in zip(chain, chain[1:])]
        src = self.crc.source
        self.comb += src.ready.eq(1)
        self.renames = {self.pads.rx_data: "rx_data", self.pads.rx_ctl: "rx_ctl",
                        src.valid: "source_valid", src.data: "source_data", src.last: "source_last",
                        src.last_be: "source_last_be", src.error: "source_error",
                        self.cd_sys.clk: "sys_clk", self.cd_sys.rst: "sys_rst",
                        self.cd_eth_rx.clk: "eth_rx_clk", self.cd_eth_rx.rst: "eth_rx_rst"}
        self.ios = set(self.renames)



def run_chain(tmp_path, frames, with_spacer):
    """The frames (without FCS) through RXChainTop in Verilator; returns (bytes out, [error of each
    word]) for each frame that came out."""
    verilog = tmp_path / "top.v"
    verilog.write_text(verilog_text(RXChainTop(with_spacer)))
    (tmp_path / "frames.hex").write_text("\n".join(f.hex() for f in frames) + "\n")
    results = tmp_path / "results.txt"
    env = dict(os.environ, RX_FRAMES=str(tmp_path / "frames.hex"), RX_RESULTS=str(results),
               PATH=f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}")
    env.pop("PYTEST_CURRENT_TEST", None)  # cocotb's runner refuses to run under pytest otherwise.
    r = subprocess.run([sys.executable, "-c", RUNNER.replace('"xgmii_sink"', '"xgmii_rx_chain"'), str(verilog),
                        str(tmp_path / "sim"), str(REPO / "test" / "gateware" / "cocotb")],
                       env=env, capture_output=True, text=True, timeout=900)
    out = r.stdout + r.stderr
    assert "TESTS=1 PASS=1 FAIL=0" in out, out[-3000:]
    got = []
    for line in results.read_text().split("\n"):
        if line:
            data, errors = line.split(" ")
            got.append((bytes.fromhex(data), [int(e) for e in errors.split(",")]))
    return got


def frames_of_every_ending(seed):
    """Frames whose last word (FCS included) holds each of 1 to 8 bytes, twice over, then a few
    longer ones: back to back, all of them fit the crossing's 256 words (sys takes 64 bits at
    125 MHz, 8 Gb/s, so each frame leaves a fifth of its words and the two spacer cycles behind)."""
    rng = random.Random(seed)
    return [bytes(rng.getrandbits(8) for _ in range(n)) for n in list(range(60, 76)) + [1514, 1001, 702, 333]]


@pytest.mark.parametrize("with_spacer", [False, True], ids=["liteeth-alone", "spacer"])
def test_back_to_back_frames_through_liteeths_64_bit_receive_chain(tmp_path, with_spacer):
    frames = frames_of_every_ending(5)
    got = run_chain(tmp_path, frames, with_spacer)
    whole = [g == (f, [0]*len(g[1])) for g, f in zip(got, frames)]
    if with_spacer:
        assert len(got) == len(frames) and all(whole), [(len(f), g[1]) for g, f in zip(got, frames)]
    else:
        # LiteEth 2024.12: frames are lost or corrupted, and flagged on a word that is not their
        # last (the receive audit's phy_error) behind a frame that ends in 5 to 8 bytes.
        assert len(got) < len(frames) or not all(whole), "LiteEth's 64-bit FCS checker passes back-to-back frames now"


def test_the_spacer_leaves_two_idle_cycles_after_each_frame_and_passes_the_beats_unchanged():
    rng = random.Random(11)
    dut = FrameSpacer(eth_phy_description(64), cycles=2)
    sent = [(rng.getrandbits(64), int(rng.random() < 0.3), rng.getrandbits(8), rng.getrandbits(8)) for _ in range(300)]
    got, trace = [], []

    @passive
    def source():
        for data, last, last_be, error in sent:
            yield dut.sink.valid.eq(1)
            yield dut.sink.data.eq(data)
            yield dut.sink.last.eq(last)
            yield dut.sink.last_be.eq(last_be)
            yield dut.sink.error.eq(error)
            yield
            while not (yield dut.sink.ready):
                yield
        yield dut.sink.valid.eq(0)

    def sink():
        for _ in range(2000):
            ready = int(rng.random() >= 0.2)
            yield dut.source.ready.eq(ready)
            yield
            valid = (yield dut.source.valid)
            last  = (yield dut.source.last)
            trace.append((valid, ready, last))
            if valid and ready:
                got.append(((yield dut.source.data), last, (yield dut.source.last_be), (yield dut.source.error)))

    run_simulation(dut, [source(), sink()])
    assert got == sent
    taken_last = [i for i, (v, r, last) in enumerate(trace) if v and r and last]
    assert len(taken_last) == sum(last for _, last, _, _ in sent)
    for i in taken_last[:-1]:
        assert trace[i + 1][0] == 0 and trace[i + 2][0] == 0, trace[i:i + 4]
