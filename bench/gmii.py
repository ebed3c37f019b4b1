#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Cycle-accurate measurement of the streamer at the GMII pins: streamer → canned-header transmit
path (gateware/txpath.py, beside LiteEth's MAC and its ARP) → LiteEth's GMII PHY TX/RX registers,
clocked at 125 MHz, in Verilator. With `phy="mii"` the same at the MII pins of a 100 Mb/s board
(the digilent_arty): LiteEth's MII PHY, a nibble per 40 ns cycle, everything at 25 MHz.

The testbench plays the host: it answers the stack's ARP request with a frame built by scapy
(an independent encoder), records every byte (or nibble) on the TX pins and decodes the frames
with scapy. Used by bench/linerate.py (tables), test/gateware/test_linerate.py and test/gateware/test_mii.py
(assertions).
"""

import zlib
from functools import reduce
from operator import or_

from migen import *

from litex.gen import *

from liteeth.core import LiteEthUDPIPCore
from liteeth.phy.gmii import LiteEthPHYGMIIRX, LiteEthPHYGMIITX
from liteeth.phy.mii import LiteEthPHYMIIRX, LiteEthPHYMIITX

from ethdaq.gateware.emulator import MODE_COUNTER, add_emulators
from ethdaq.gateware.streamer import DAQStreamer
from ethdaq.gateware.timebase import Timebase
from ethdaq.gateware.txpath import TXPath, connect_streamer

BOARD_MAC, BOARD_IP = 0x10e2d5000000, "192.168.1.50"
HOST_MAC,  HOST_IP  = "aa:b6:24:69:77:21", "192.168.1.100"
IFG = 12


# Data pins per PHY (MII carries a nibble per cycle).
PINS = {"gmii": 8, "mii": 4}


class _Pads:
    def __init__(self, width=8):
        self.tx_en, self.tx_er, self.tx_data = Signal(), Signal(), Signal(width)
        self.rx_dv, self.rx_er, self.rx_data = Signal(), Signal(), Signal(width)


class _SimPHY(LiteXModule):
    """LiteEth's GMII (125 MHz) or MII (25 MHz, 100 Mb/s) TX/RX in the eth_tx/eth_rx domains, on
    the same clock as sys here."""
    dw = 8
    with_preamble_crc = True

    def __init__(self, pads, phy="gmii"):
        tx, rx = {"gmii": (LiteEthPHYGMIITX, LiteEthPHYGMIIRX), "mii": (LiteEthPHYMIITX, LiteEthPHYMIIRX)}[phy]
        self.tx_clk_freq = self.rx_clk_freq = {"gmii": 125e6, "mii": 25e6}[phy]
        self.cd_eth_tx = ClockDomain()
        self.cd_eth_rx = ClockDomain()
        self.tx = ClockDomainsRenamer("eth_tx")(tx(pads))
        self.rx = ClockDomainsRenamer("eth_rx")(rx(pads))
        self.sink, self.source = self.tx.sink, self.rx.source


class StreamBench(Module):
    def __init__(self, nchannels=1, sample_width=16, max_payload=8972, phy="gmii"):
        self.pads = _Pads(PINS[phy])
        self.submodules.phy = _SimPHY(self.pads, phy)
        clk_freq = self.phy.tx_clk_freq
        self.submodules.txpath = TXPath(self.phy, BOARD_MAC, BOARD_IP)
        self.submodules.core = LiteEthUDPIPCore(self.txpath.mac_phy, BOARD_MAC, BOARD_IP, clk_freq=clk_freq, dw=8)
        self.submodules.timebase = Timebase(clk_freq)
        self.submodules.streamer = DAQStreamer(nchannels=nchannels, sample_width=sample_width,
            timestamp=self.timebase.ns, max_payload=max_payload, cd_tx="eth_tx", clk_freq=clk_freq)
        connect_streamer(self, self.streamer, self.txpath, self.core)
        self.emulators = add_emulators(self, self.streamer)


def _arp_reply_wire(phy="gmii"):
    """The host's ARP reply as the testbench puts it on the RX pins, one entry per cycle: bytes
    (GMII), or nibbles, low nibble first (MII, IEEE 802.3 clause 22)."""
    from scapy.layers.l2 import ARP, Ether
    frame = bytes(Ether(dst="10:e2:d5:00:00:00", src=HOST_MAC) /
                  ARP(op=2, hwsrc=HOST_MAC, psrc=HOST_IP, hwdst="10:e2:d5:00:00:00", pdst=BOARD_IP))
    frame = frame.ljust(60, b"\0")
    wire = b"\x55"*7 + b"\xd5" + frame + zlib.crc32(frame).to_bytes(4, "little")
    return wire if phy == "gmii" else bytes(n for b in wire for n in (b & 0xf, b >> 4))


class StreamBenchTop(Module):
    """StreamBench with its controls as top-level ports, one clock, for Verilator."""
    def __init__(self, nchannels=4, sample_width=16, max_payload=8972, phy="gmii"):
        self.clock_domains.cd_sys = ClockDomain()
        self.submodules.bench = bench = StreamBench(nchannels, sample_width, max_payload, phy)
        streamer = bench.streamer
        self.payload, self.rate, self.gap = Signal(16, name="payload"), Signal(32, name="rate"), Signal(32, name="gap")
        self.enable, self.start = Signal(nchannels, name="enable"), Signal(name="start")
        self.mode, self.flush = Signal(2, name="mode"), Signal(32, name="flush")
        self.close = Signal(name="close")
        self.accept = Signal(nchannels, name="accept")  # Per channel: a sample joins a datagram.
        pads = bench.pads
        self.comb += [
            bench.phy.cd_eth_tx.clk.eq(ClockSignal()), bench.phy.cd_eth_rx.clk.eq(ClockSignal()),
            bench.phy.cd_eth_tx.rst.eq(ResetSignal()), bench.phy.cd_eth_rx.rst.eq(ResetSignal()),
            # Standalone (no CSR bank), the CSRs' storage and fields are ours to drive.
            streamer._payload.storage.eq(self.payload),
            streamer._dst_ip.storage.eq(0xC0A80164),
            streamer._dst_port.storage.eq(5000),
            streamer._mac_mode.storage.eq(0),  # Resolve by ARP: the testbench answers.
            streamer._enable.storage.eq(self.enable),
            streamer._backpressure.storage.eq(0),
            streamer._gap.storage.eq(self.gap),
            streamer._flush.storage.eq(self.flush),
            self.accept.eq(Cat(*[ch.accept for ch in streamer.channels])),
            streamer._control.fields.start.eq(self.start),
            streamer._control.fields.stop.eq(0),
            self.close.eq(reduce(or_, [ch.descs.sink.valid & ch.descs.sink.ready for ch in streamer.channels])),
        ]
        for emu in bench.emulators:
            self.comb += [emu._mode.storage.eq(self.mode), emu._rate.storage.eq(self.rate),
                          emu._step.storage.eq(1), emu._top.storage.eq(2**sample_width - 1)]
        self.ios = {self.payload, self.rate, self.gap, self.enable, self.start, self.close, self.mode, self.flush,
                    self.accept,
                    pads.tx_en, pads.tx_data, pads.rx_dv, pads.rx_data, self.cd_sys.clk, self.cd_sys.rst}
        self.renames = {pads.tx_en: "tx_en", pads.tx_data: "tx_data", pads.rx_dv: "rx_dv", pads.rx_data: "rx_data",
                        self.cd_sys.clk: "sys_clk", self.cd_sys.rst: "sys_rst"}


def build_verilator(build_dir, nchannels=4, sample_width=16, max_payload=8972, phy="gmii"):
    """Generate Verilog and compile the testbench (skipped when the Verilog is unchanged)."""
    from pathlib import Path
    from bench.verilate import compile_top
    top = StreamBenchTop(nchannels, sample_width, max_payload, phy)
    return compile_top(top, build_dir, Path(__file__).parent / "verilator" / "tb.cpp")


# The streamer's idle flush in the bench unless given: its build default, 1 ms of 125 MHz cycles.
FLUSH_DEFAULT = 125_000 - 1


def measure(exe, payload, frames=8, enable=0b1, rate=2**32 - 1, gap=0, max_cycles=10_000_000, phy="gmii",
            mode=MODE_COUNTER, flush=FLUSH_DEFAULT):
    """Run the Verilator bench; return what the TX pins carried (see _decode): on MII the
    nibbles joined into bytes, low nibble first, and the gaps in byte times. frames=0: run
    max_cycles whatever was sent. `accepts`: (cycle, channel mask) of every cycle in which
    channels took a sample into a datagram (the emulators in `mode`: counter or pulse)."""
    import subprocess
    import tempfile
    with tempfile.NamedTemporaryFile(suffix=".bin") as arp:
        arp.write(_arp_reply_wire(phy))
        arp.flush()
        r = subprocess.run([str(exe), str(payload), str(rate), str(enable), str(frames + 1 if frames else 0),
                            arp.name, str(max_cycles), str(gap), str(mode), str(flush)], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"bench failed: {r.stderr.strip()}")
    tx, closes, accepts = [], [], []
    for line in r.stdout.splitlines():
        kind, *rest = line.split()
        if kind == "T":
            tx.append((int(rest[0]), 1, int(rest[1], 16)))
        elif kind == "A":
            accepts.append((int(rest[0]), int(rest[1], 16)))
        else:
            closes.append(int(rest[0]))
    r = dict(_decode(tx, closes), accepts=accepts)
    if phy == "mii":
        r = _join_nibbles(r)
    return r


def stage_cycles(payload=256, cycles=3000):
    """Where the transmit path's latency goes: Migen's simulation of the same bench (no
    Verilator), one channel at a third of the link, the host's ARP answer on the RX pins. For a
    datagram after the first: [(stage, cycles from the cycle its descriptor is pushed to the
    stage's first `valid`)], in path order, ending with tx_en at the pins."""
    from migen import run_simulation
    from ethdaq import migensim
    top = StreamBenchTop(nchannels=1)
    b, tp = top.bench, top.bench.txpath
    stages = [("descriptor crossed to eth_tx", b.streamer.channels[0].descs.source.valid),
              ("serializer output", b.streamer.source.valid),
              ("data_buf (registered buffer)", tp.data_buf.source.valid),
              ("framer_reg (framer's output register)", tp.framer_reg.source.valid),
              ("mactx (FCS and preamble)", tp.mactx.source.valid),
              ("phy_reg (register in front of the PHY)", tp.phy_reg.source.valid),
              ("tx_en (GMII output register)", b.pads.tx_en)]
    samples = (payload - 40)//2
    arp, closes, firsts = _arp_reply_wire(), [], []

    def gen():
        for s, v in ((top.payload, payload), (top.rate, int(2**32*samples/((payload + 66)*3))), (top.enable, 1),
                     (top.mode, MODE_COUNTER), (top.gap, 0), (top.flush, 0)):
            yield s.eq(v)
        yield top.start.eq(1)
        yield
        yield top.start.eq(0)
        prev, tx_end, answered = [0]*len(stages), None, False
        for cycle in range(cycles):
            if (yield top.close):
                closes.append(cycle)
            now = []
            for _, sig in stages:
                now.append((yield sig))
            firsts.extend((cycle, k) for k, v in enumerate(now) if v and not prev[k])
            prev = now
            if not answered and now[-1]:
                tx_end = cycle
            if not answered and tx_end is not None and cycle > tx_end + 20:   # The ARP request has ended.
                answered = True
                for byte in arp:
                    yield [b.pads.rx_dv.eq(1), b.pads.rx_data.eq(byte)]
                    yield
                yield b.pads.rx_dv.eq(0)
            yield

    import migen.sim.core
    previous = migen.sim.core.Simulator    # What the caller runs (the test suite installs ours).
    migensim.install()                     # Our simulator ticks eth_tx and eth_rx, sys's aliases.
    try:
        run_simulation(top, gen())
    finally:
        migen.sim.core.Simulator = previous
    close = closes[1]                       # The first datagram waits for the ARP answer.
    out = []
    for k, (name, _) in enumerate(stages):
        out.append((name, min(c for c, j in firsts if j == k and c >= close) - close))
    return out


def _join_nibbles(r):
    """A decoded MII capture with each frame's nibbles joined into bytes, low nibble first. A
    frame of an odd number of nibbles, or a gap of an odd number of nibble times, is an error on
    the wire: kept visible (a trailing nibble as its own byte), not rounded away."""
    frames = []
    for f in r["frames"]:
        if any(n > 0xf for n in f):
            raise ValueError("MII capture: a value wider than a nibble on tx_data")
        joined = bytes(f[i] | (f[i + 1] << 4) for i in range(0, len(f) - 1, 2))
        frames.append(joined + (bytes([f[-1]]) if len(f) % 2 else b""))
    return {**r, "frames": frames, "nibbles": [len(f) for f in r["frames"]],
            "gaps": [g / 2 for g in r["gaps"]]}


def _decode(tx, closes):
    """tx: (cycle, 1, byte) for every cycle with tx_en high. Frames are runs of consecutive
    cycles; gaps are the idle cycles between them; ends are the first idle cycle after a frame."""
    frames, starts, ends = [], [], []
    cur, last = None, None
    for cycle, _, data in tx:
        if cur is not None and cycle != last + 1:
            frames.append(bytes(cur))
            ends.append(last + 1)
            cur = None
        if cur is None:
            cur, start = [], cycle
            starts.append(start)
        cur.append(data)
        last = cycle
    if cur is not None:
        frames.append(bytes(cur))
        ends.append(last + 1)
    gaps = [s - e for e, s in zip(ends, starts[1:])]
    return {"frames": frames, "starts": starts, "ends": ends, "gaps": gaps, "closes": closes}
