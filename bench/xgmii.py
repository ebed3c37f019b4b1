#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Cycle-accurate measurement of a 64-bit Ethernet TX path at the XGMII pins (Verilator).

One clock (sys, 156.25 MHz nominal: one 64-bit XGMII column, 8 byte times, per cycle, so the
link carries 1.25e9 bytes/s). The chain under test is

    IdealFrameSource --> XGMIITXPath.sink
    XGMIITXPath: LiteEthMACCRC32Inserter(64) -> LiteEthMACPreambleInserter(64) -> LiteEthPHYXGMIITX

IdealFrameSource emits back-to-back Ethernet/IPv4/UDP frames (without preamble and FCS) as an
eth_phy_description(64) stream whenever `enable` is high; their length is a run-time port.
XGMIITXPath.sink is where our own 64-bit framer will be plugged in later.

`mac="gapless"` replaces LiteEth's CRC and preamble inserters by GaplessMACTX, a reference
inserter that needs no idle cycle between frames. It is there to measure LiteEth's XGMII PHY on
its own (lane-4 starts, deficit idle count), not as a part of the product.

decode_xgmii() is an independent decoder of the XGMII lanes (IEEE 802.3 clause 46) that checks
preamble/SFD and FCS; measure() runs the Verilator bench and returns throughput figures.
"""

import zlib
from collections import namedtuple
from functools import reduce
from operator import or_

from migen import *

from litex.gen import *
from litex.soc.interconnect import stream

from liteeth.common import eth_phy_description, eth_preamble
from liteeth.mac.crc import LiteEthMACCRC32, LiteEthMACCRC32Inserter
from liteeth.mac.preamble import LiteEthMACPreambleInserter
from liteeth.phy.xgmii import LiteEthPHYXGMIITX

from ethdaq.gateware.xgmiitx import XGMIITransmitter

CLK_HZ = 156.25e6
BYTES_PER_S = 8*CLK_HZ  # 1.25e9 byte times per second.
UDP_OVERHEAD = 8 + 14 + 20 + 8 + 4 + 12  # Preamble+SFD, Ethernet, IPv4, UDP, FCS, minimum IFG.
HEADER_LEN = 14 + 20 + 8
MIN_FRAME_LEN, MAX_FRAME_LEN = 60, 9600  # Frame bytes without FCS that the bench supports.
MACS = ("liteeth", "gapless", "ethdaq")  # XGMIITXPath's transmit paths.

SRC_MAC, DST_MAC = 0x10e2d5000000, 0xaab624697721
SRC_IP, DST_IP = 0xC0A80132, 0xC0A80164  # 192.168.1.50 -> 192.168.1.100
SRC_PORT, DST_PORT = 5000, 5000

XGMII_IDLE, XGMII_START, XGMII_TERM, XGMII_ERROR = 0x07, 0xFB, 0xFD, 0xFE


# Pads ---------------------------------------------------------------------------------------------

class XGMIIPads:
    """XGMII (64-bit, one clock edge) pads, one set of signals per instance (LiteEth's
    LiteEthPHYXGMIIPads has class-level signals, shared by every instance)."""
    def __init__(self):
        self.tx_ctl, self.tx_data = Signal(8), Signal(64)
        self.rx_ctl, self.rx_data = Signal(8), Signal(64)


# Ideal frame source -------------------------------------------------------------------------------

def expected_frame(length, seq):
    """The bytes (without FCS) IdealFrameSource sends as frame number `seq` of `length` bytes:
    Ethernet/IPv4/UDP headers (IPv4 identification = seq, IPv4 checksum valid, UDP checksum 0)
    then byte i of the frame = (i + seq) & 0xff."""
    seq &= 0xffff
    ip = bytearray([0x45, 0x00]) + (length - 14).to_bytes(2, "big") + seq.to_bytes(2, "big") + \
        bytes([0x40, 0x00, 0x40, 0x11, 0, 0]) + SRC_IP.to_bytes(4, "big") + DST_IP.to_bytes(4, "big")
    s = sum(int.from_bytes(ip[i:i + 2], "big") for i in range(0, 20, 2))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    ip[10:12] = (~s & 0xffff).to_bytes(2, "big")
    udp = SRC_PORT.to_bytes(2, "big") + DST_PORT.to_bytes(2, "big") + (length - 34).to_bytes(2, "big") + b"\0\0"
    header = DST_MAC.to_bytes(6, "big") + SRC_MAC.to_bytes(6, "big") + b"\x08\x00" + bytes(ip) + udp
    return header + bytes((i + seq) & 0xff for i in range(HEADER_LEN, length))


class IdealFrameSource(LiteXModule):
    """Back-to-back frames (no preamble/FCS) as an eth_phy_description(64) stream.

    enable    : in, frames are sent while high (the current frame is finished when it falls).
    frame_len : in, frame length in bytes without FCS (MIN_FRAME_LEN..MAX_FRAME_LEN), latched
                while idle and when a frame's last word is accepted (for the next frame), so
                it may change any time after `sof` without affecting the current frame.
    sof       : out, pulses when the first word of a frame is accepted.
    seq       : out, number of the current frame (IPv4 identification), from 0.
    source    : frames; valid stays high from a frame's first word to its last (no bubbles).
    The content is expected_frame(frame_len, seq).
    """
    def __init__(self):
        self.enable = Signal()
        self.frame_len = Signal(16)
        self.sof = Signal()
        self.seq = seq = Signal(16)
        self.source = source = stream.Endpoint(eth_phy_description(64))

        # # #

        running = Signal()
        length = Signal(16)
        word = Signal(16)
        len_m1 = Signal(16)
        is_last = Signal()
        self.comb += [
            len_m1.eq(length - 1),
            is_last.eq(word == len_m1[3:]),
            source.valid.eq(running),
            source.first.eq(word == 0),
            source.last.eq(is_last),
            If(is_last, source.last_be.eq(Cat(*[len_m1[:3] == i for i in range(8)]))),
            self.sof.eq(source.valid & source.ready & (word == 0)),
        ]
        self.sync += [
            If(~running,
                running.eq(self.enable),
                length.eq(self.frame_len),
                word.eq(0),
            ).Elif(source.ready,
                word.eq(word + 1),
                If(is_last,
                    word.eq(0),
                    seq.eq(seq + 1),
                    length.eq(self.frame_len),
                    running.eq(self.enable),
                ),
            ),
        ]

        # Headers (big-endian fields; the first byte on the wire is the low byte of a word).
        def be(value, nbytes):
            if isinstance(value, int):
                return [Constant(b, 8) for b in value.to_bytes(nbytes, "big")]
            return [value[8*(nbytes - 1 - i):8*(nbytes - i)] for i in range(nbytes)]
        ip_len, udp_len, csum = Signal(16), Signal(16), Signal(16)
        s0, s1, s2 = Signal(20), Signal(17), Signal(17)
        const = 0x4500 + 0x4000 + 0x4011 + (SRC_IP >> 16) + (SRC_IP & 0xffff) + (DST_IP >> 16) + (DST_IP & 0xffff)
        self.comb += [
            ip_len.eq(length - 14),
            udp_len.eq(length - 34),
            s0.eq(const + ip_len + seq),
            s1.eq(s0[:16] + s0[16:]),
            s2.eq(s1[:16] + s1[16:]),
            csum.eq(~s2[:16]),
        ]
        header = (be(DST_MAC, 6) + be(SRC_MAC, 6) + be(0x0800, 2) +
                  be(0x4500, 2) + be(ip_len, 2) + be(seq, 2) + be(0x4000, 2) + be(0x4011, 2) + be(csum, 2) +
                  be(SRC_IP, 4) + be(DST_IP, 4) +
                  be(SRC_PORT, 2) + be(DST_PORT, 2) + be(udp_len, 2) + be(0, 2))
        assert len(header) == HEADER_LEN

        # Byte i of the frame is (i + seq) & 0xff outside the headers.
        lanes = [Signal(8) for _ in range(8)]
        self.comb += [lane.eq(Cat(Constant(b, 3), word[:5]) + seq[:8]) for b, lane in enumerate(lanes)]
        cases = {}
        for w in range((HEADER_LEN + 7)//8):
            cases[w] = source.data.eq(Cat(*[header[8*w + b] if 8*w + b < HEADER_LEN else lanes[b]
                                            for b in range(8)]))
        cases["default"] = source.data.eq(Cat(*lanes))
        self.comb += Case(word, cases)


# Reference gapless CRC + preamble inserter -------------------------------------------------------

class GaplessMACTX(LiteXModule):
    """Reference 64-bit preamble + CRC inserter without idle cycles between frames.

    sink: frames without preamble/FCS (eth_phy_description(64), last_be one-hot).
    source: preamble word, frame, FCS, back-to-back as long as the sink has no bubbles.
    Per frame it takes one cycle of preamble plus ceil((len + 4)/8) words. Diagnostic only.
    """
    def __init__(self):
        self.sink = sink = stream.Endpoint(eth_phy_description(64))
        self.source = source = stream.Endpoint(eth_phy_description(64))

        # # #

        self.crc = crc = LiteEthMACCRC32(64)
        saved_crc, saved_be = Signal(32), Signal(8)
        self.comb += [
            crc.data.eq(sink.data),
            crc.be.eq(sink.last_be),
        ]
        self.fsm = fsm = FSM(reset_state="PREAMBLE")
        fsm.act("PREAMBLE",
            crc.reset.eq(1),
            source.valid.eq(sink.valid),
            source.first.eq(1),
            source.data.eq(eth_preamble),
            If(source.valid & source.ready, NextState("DATA")),
        )
        fsm.act("DATA",
            crc.ce.eq(sink.valid & source.ready),
            source.valid.eq(sink.valid),
            sink.ready.eq(source.ready),
            source.data.eq(sink.data),
            If(sink.last,
                # n = valid bytes in the last word; the FCS fills the 8 - n bytes left.
                *[If(sink.last_be[n - 1], source.data.eq(Cat(sink.data[:8*n], crc.value)[:64]))
                  for n in range(1, 8)],
                If(sink.last_be[:4] != 0,
                    source.last.eq(1),
                    source.last_be.eq(sink.last_be << 4),
                ),
            ),
            If(sink.valid & sink.ready & sink.last,
                NextValue(saved_be, sink.last_be >> 4),
                *[If(sink.last_be[n - 1], NextValue(saved_crc, crc.value >> 8*(8 - n))) for n in range(5, 9)],
                If(sink.last_be[:4] != 0,
                    NextState("PREAMBLE"),
                ).Else(
                    NextState("FCS"),
                ),
            ),
        )
        fsm.act("FCS",
            source.valid.eq(1),
            source.data.eq(saved_crc),
            source.last.eq(1),
            source.last_be.eq(saved_be),
            If(source.ready, NextState("PREAMBLE")),
        )


# TX path ------------------------------------------------------------------------------------------

class XGMIITXPath(LiteXModule):
    """64-bit TX path from frames (without preamble/FCS) to the XGMII TX pads.

    sink : eth_phy_description(64), frames without preamble/FCS, last_be one-hot on the last
           word, at least MIN_FRAME_LEN bytes (no padding inserter). LiteEth's XGMII PHY has no
           underrun handling: valid must stay high from a frame's first word to its last.
    pads : XGMIIPads (tx_ctl, tx_data driven).
    mac  : "liteeth" (LiteEthMACCRC32Inserter -> LiteEthMACPreambleInserter -> LiteEth's XGMII
           TX), "gapless" (GaplessMACTX, reference, -> LiteEth's XGMII TX) or "ethdaq" (our own
           gateware/xgmiitx.XGMIITransmitter: FCS, preamble, lanes and gap in one module).
    dic  : deficit idle count in LiteEthPHYXGMIITX (XGMIITransmitter always keeps one).
    """
    def __init__(self, pads, mac="liteeth", dic=True):
        self.pads = pads
        self.sink = stream.Endpoint(eth_phy_description(64))

        # # #

        if mac == "liteeth":
            self.crc = LiteEthMACCRC32Inserter(eth_phy_description(64))
            self.preamble = LiteEthMACPreambleInserter(64)
            stages = [self.crc, self.preamble]
        elif mac == "gapless":
            self.mac = GaplessMACTX()
            stages = [self.mac]
        elif mac == "ethdaq":
            self.tx = XGMIITransmitter(pads)
            self.comb += self.sink.connect(self.tx.sink)
            return
        else:
            raise ValueError(f"mac must be one of {MACS}, not {mac!r}")
        self.phy = LiteEthPHYXGMIITX(pads, dw=64, dic=dic)
        self.pipeline = stream.Pipeline(self.sink, *stages, self.phy)


def xgmii_tx_chain(dw=64, pads=None, mac="liteeth", dic=True):
    """An XGMIITXPath (with new XGMIIPads unless given). Only dw=64 exists."""
    assert dw == 64, "LiteEth's XGMII PHY is 64-bit only"
    return XGMIITXPath(pads if pads is not None else XGMIIPads(), mac=mac, dic=dic)


class XGMIIBenchTop(LiteXModule):
    """IdealFrameSource -> XGMIITXPath, one clock, controls and XGMII TX as top-level ports:
    sys_clk, sys_rst, enable, frame_len (16), sof (out), tx_ctl (8), tx_data (64)."""
    def __init__(self, mac="liteeth", dic=True):
        self.cd_sys = ClockDomain()
        self.pads = XGMIIPads()
        self.gen = IdealFrameSource()
        self.path = XGMIITXPath(self.pads, mac=mac, dic=dic)
        self.comb += self.gen.source.connect(self.path.sink)
        self.enable, self.frame_len, self.sof = self.gen.enable, self.gen.frame_len, self.gen.sof
        # Stream10GBenchTop's latency ports, unused here, so one testbench drives both tops.
        self.rate, self.chmask, self.close = Signal(32), Signal(4), Signal()
        self.renames = {self.enable: "enable", self.frame_len: "frame_len", self.sof: "sof",
                        self.rate: "rate", self.chmask: "chmask", self.close: "close",
                        self.pads.tx_ctl: "tx_ctl", self.pads.tx_data: "tx_data",
                        self.cd_sys.clk: "sys_clk", self.cd_sys.rst: "sys_rst"}
        self.ios = set(self.renames)


class _XGMIITXPHY(LiteXModule):
    """An XGMII transmitter as the PHY of gateware/txpath.TXPath (transmit only): LiteEth's
    XGMII TX (behind LiteEth's CRC and preamble inserters in TXPath), or ethdaq's
    XGMIITransmitter, which makes preamble, padding and FCS itself."""
    dw = 64
    integrated_ifg_inserter = True

    def __init__(self, pads, tx="liteeth", dic=True):
        if tx == "ethdaq":
            self.with_preamble_crc = self.with_padding = False
            self.registered_outputs = True  # TXPath puts no register in front of it.
            self.tx = XGMIITransmitter(pads)
        else:
            self.tx = LiteEthPHYXGMIITX(pads, dw=64, dic=dic)
        self.sink   = self.tx.sink
        self.source = stream.Endpoint(eth_phy_description(64))  # Nothing received.


class Stream10GBenchTop(LiteXModule):
    """The DAQ streamer with a 64-bit data path (4 channels of 16-bit counter samples at one
    sample per cycle each, more than the link carries) → TXPath (framer, frame scheduler at 64
    bits) → the XGMII transmitter `tx`: "liteeth" (TXPath's CRC and preamble inserters, LiteEth's
    XGMII TX) or "ethdaq" (gateware/xgmiitx.py), one 156.25 MHz clock. With `cdc` the transmit
    side runs in its own domain (eth_tx) on the same clock, so datagrams cross from the detector
    clock through the channel buffers' gray pointers as on a board; without, everything is in
    sys. Same ports as XGMIIBenchTop, so tb_xgmii.cpp drives it: a run starts when `enable`
    rises; `frame_len` sets the UDP payload to frame_len - 42 (one size per run); `rate` is the
    emulators' sample rate (fraction of 2**32 per cycle) and `chmask` the channels enabled;
    `close` is high in the cycle a channel hands a complete datagram to the transmit side (the
    latency's start). The destination MAC is fixed (no ARP partner here)."""
    def __init__(self, nchannels=4, sample_width=16, max_payload=8972, tx="liteeth", cdc=False):
        from ethdaq.gateware.emulator import MODE_COUNTER, add_emulators
        from ethdaq.gateware.streamer import DAQStreamer
        from ethdaq.gateware.txpath import TXPath, connect_streamer
        self.cd_sys = ClockDomain()
        cd_tx = "sys"
        if cdc:
            cd_tx = "eth_tx"
            self.cd_eth_tx = ClockDomain()
            self.comb += [self.cd_eth_tx.clk.eq(ClockSignal()), self.cd_eth_tx.rst.eq(ResetSignal())]
        self.pads   = XGMIIPads()
        self.phy    = ClockDomainsRenamer(cd_tx)(_XGMIITXPHY(self.pads, tx=tx))
        self.txpath = TXPath(self.phy, 0x10E2D5000000, "192.168.1.50", cd_tx=cd_tx)
        self.streamer = streamer = DAQStreamer(nchannels=nchannels, sample_width=sample_width,
            max_payload=max_payload, cd_tx=cd_tx, clk_freq=156.25e6, dw=64,
            buffer_bytes=4*16384)  # Four jumbo datagrams per channel: data always waits.
        connect_streamer(self, streamer, self.txpath)
        self.emulators = add_emulators(self, streamer)
        self.enable, self.frame_len, self.sof = Signal(), Signal(16), Signal()
        self.rate, self.chmask, self.close = Signal(32), Signal(nchannels), Signal()
        enable_d = Signal()
        self.sync += enable_d.eq(self.enable)
        self.comb += [
            # Standalone (no CSR bank), the CSRs' storage and fields are ours to drive.
            streamer._payload.storage.eq(self.frame_len - 42),
            streamer._dst_ip.storage.eq(0xC0A80164),
            streamer._dst_port.storage.eq(5000),
            streamer._dst_mac.storage.eq(0xAAB624697721),
            streamer._mac_mode.storage.eq(1),
            streamer._enable.storage.eq(self.chmask),
            streamer._backpressure.storage.eq(0),
            streamer._gap.storage.eq(0),
            streamer._control.fields.start.eq(self.enable & ~enable_d),
            streamer._control.fields.stop.eq(0),
            self.sof.eq(0),  # One payload size per run: measure() gives one frame_len.
            self.close.eq(reduce(or_, [ch.descs.sink.valid & ch.descs.sink.ready for ch in streamer.channels])),
        ]
        for emu in self.emulators:
            self.comb += [emu._mode.storage.eq(MODE_COUNTER), emu._rate.storage.eq(self.rate),
                          emu._step.storage.eq(1), emu._top.storage.eq(2**sample_width - 1)]
        self.renames = {self.enable: "enable", self.frame_len: "frame_len", self.sof: "sof",
                        self.rate: "rate", self.chmask: "chmask", self.close: "close",
                        self.pads.tx_ctl: "tx_ctl", self.pads.tx_data: "tx_data",
                        self.cd_sys.clk: "sys_clk", self.cd_sys.rst: "sys_rst"}
        self.ios = set(self.renames)


# Verilator build ----------------------------------------------------------------------------------

STREAMERS = {"streamer": {}, "streamer-ethdaq": {"tx": "ethdaq", "cdc": True}}


def build_verilator(build_dir, mac="liteeth", dic=True):
    """Generate Verilog and compile bench/verilator/tb_xgmii.cpp; return the executable.
    Skipped when neither the Verilog nor the testbench changed. mac="streamer" builds
    Stream10GBenchTop (our streamer and transmit path through LiteEth's XGMII TX, one clock
    domain) instead of the ideal frame source; "streamer-ethdaq" the same through our
    XGMIITransmitter, with the detector clock crossing."""
    from pathlib import Path
    from bench.verilate import compile_top
    top = Stream10GBenchTop(**STREAMERS[mac]) if mac in STREAMERS else XGMIIBenchTop(mac=mac, dic=dic)
    return compile_top(top, build_dir, Path(__file__).parent / "verilator" / "tb_xgmii.cpp")


def run(exe, frame_len, frames, max_cycles=None, rate=2**32 - 1, chmask=0xf):
    """Run the bench until `frames` frames ended on the wire; return its output lines.
    frame_len: an int, or a list of ints used in turn (frame i has frame_len[i % len]).
    rate, chmask: Stream10GBenchTop's emulator rate and channel enables (ignored by XGMIIBenchTop)."""
    import subprocess
    lens = list(frame_len) if isinstance(frame_len, (list, tuple)) else [frame_len]
    for n in lens:
        if not MIN_FRAME_LEN <= n <= MAX_FRAME_LEN:
            raise ValueError(f"frame_len {n} outside {MIN_FRAME_LEN}..{MAX_FRAME_LEN}")
    if max_cycles is None:
        max_cycles = 1000 + 4*frames*(max(lens) + 64)//8
    r = subprocess.run([str(exe), ",".join(map(str, lens)), str(frames), str(max_cycles), str(rate), str(chmask)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"bench failed ({r.returncode}): {r.stderr.strip()}")
    return r.stdout.splitlines()


def run_migen(frame_len, frames, mac="liteeth", dic=True, max_cycles=100_000):
    """The same as run(), in Migen's own simulator (Python semantics for expression widths,
    unlike the generated Verilog). Slow: for short frames only."""
    lens = list(frame_len) if isinstance(frame_len, (list, tuple)) else [frame_len]
    top = Stream10GBenchTop(**STREAMERS[mac]) if mac in STREAMERS else XGMIIBenchTop(mac=mac, dic=dic)
    lines = []

    def gen():
        yield top.frame_len.eq(lens[0])
        yield top.rate.eq(2**32 - 1)
        yield top.chmask.eq(0xf)
        cycle, done, sofs = 0, 0, 0
        while cycle < max_cycles and done < frames:
            yield top.enable.eq(cycle >= 20)
            sof = (yield top.sof)
            yield
            cycle += 1
            if sof:
                sofs += 1
                yield top.frame_len.eq(lens[sofs % len(lens)])
            ctl, data = (yield top.pads.tx_ctl), (yield top.pads.tx_data)
            if ctl != 0xff or data != 0x0707070707070707:
                lines.append(f"X {cycle} {ctl:02x} {data:016x}")
                done += sum(1 for i in range(8) if (ctl >> i) & 1 and (data >> 8*i) & 0xff == XGMII_TERM)
    run_simulation(top, gen())
    return lines


# XGMII decoder ------------------------------------------------------------------------------------

XGMIIFrame = namedtuple("XGMIIFrame", "data start end lane preamble_ok fcs_ok")
XGMIIFrame.__doc__ = """One frame from the XGMII lanes.
data        : bytes after the SFD, FCS included.
start       : byte time of the /S/ character (cycle*8 + lane).
end         : byte time of the /T/ character, i.e. of the first byte after the FCS.
lane        : lane of /S/ (0 or 4).
preamble_ok : /S/ was followed by 6 x 0x55 and the SFD 0xD5.
fcs_ok      : the last 4 bytes are zlib.crc32 of the others, little-endian.
The inter-frame gap before frame k is frames[k].start - frames[k - 1].end (byte times from the
end of the FCS, /T/ included, to the start character)."""


class XGMIIError(Exception):
    pass


def decode_xgmii(lines):
    """Decode XGMII TX lanes into XGMIIFrames (IEEE 802.3 clause 46).

    lines: "X cycle ctl_hex data_hex" for every cycle where some lane is not idle (other lines
    are ignored; cycles not listed are all /I/). Lane i is ctl bit i and data bits 8i..8i+7.
    Raises XGMIIError on a lane protocol violation: /S/ other than in lane 0 or 4, /S/ inside a
    frame, a control character other than /T/ inside a frame (e.g. /E/), anything but /I/
    between frames or after /T/ in its column. A frame still open at the end is dropped."""
    frames = []
    cur = None        # bytes after /S/, while in a frame
    start = lane0 = None
    prev_cycle = None
    for line in lines:
        parts = line.split()
        if not parts or parts[0] != "X":
            continue
        cycle, ctl, data = int(parts[1]), int(parts[2], 16), int(parts[3], 16)
        if prev_cycle is not None and cycle <= prev_cycle:
            raise XGMIIError(f"cycle {cycle} after {prev_cycle}")
        if cur is not None and prev_cycle is not None and cycle != prev_cycle + 1:
            raise XGMIIError(f"idle column inside a frame at cycle {prev_cycle + 1}")
        prev_cycle = cycle
        after_term = False
        for lane in range(8):
            c, d = (ctl >> lane) & 1, (data >> 8*lane) & 0xff
            pos = 8*cycle + lane
            if after_term:
                if not (c and d == XGMII_IDLE):
                    raise XGMIIError(f"{'ctl' if c else 'data'} {d:02x} after /T/ at cycle {cycle} lane {lane}")
                continue
            if cur is None:
                if c and d == XGMII_IDLE:
                    continue
                if c and d == XGMII_START:
                    if lane not in (0, 4):
                        raise XGMIIError(f"/S/ in lane {lane} at cycle {cycle}")
                    cur, start, lane0 = bytearray(), pos, lane
                    continue
                raise XGMIIError(f"{'ctl' if c else 'data'} {d:02x} between frames at cycle {cycle} lane {lane}")
            if not c:
                cur.append(d)
            elif d == XGMII_TERM:
                pre, body = bytes(cur[:7]), bytes(cur[7:])
                fcs_ok = len(body) >= 4 and zlib.crc32(body[:-4]).to_bytes(4, "little") == body[-4:]
                frames.append(XGMIIFrame(body, start, pos, lane0, pre == b"\x55"*6 + b"\xd5", fcs_ok))
                cur = None
                after_term = True
            else:
                raise XGMIIError(f"control {d:02x} inside a frame at cycle {cycle} lane {lane}")
    return frames


def ifgs(frames):
    """Inter-frame gaps in byte times (/T/ included) between consecutive frames."""
    return [b.start - a.end for a, b in zip(frames, frames[1:])]


# Measurement --------------------------------------------------------------------------------------

def theoretical_payload_bytes_s(payload):
    return payload/(payload + UDP_OVERHEAD)*BYTES_PER_S


def measure(exe, frame_len, frames=16, skip=1):
    """Send `frames` frames of `frame_len` bytes (without FCS) and measure at the XGMII pins.

    The period is taken from the /S/ of frame `skip` to the /S/ of the last frame (steady state).
    Returns a dict:
      frames           decoded XGMIIFrames (all of them)
      period           mean byte times from one /S/ to the next
      ifgs             sorted set of inter-frame gaps (byte times, /T/ included), ifg_mean their mean
      lanes            set of /S/ lanes
      frame_bytes_s    frame bytes (without preamble/FCS) per second
      payload          UDP payload bytes per frame (frame_len - 42)
      payload_mib_s    UDP payload MiB/s, theory_mib_s = payload/(payload+66) x 1.25e9 in MiB/s
      pct              100 x payload_mib_s / theory_mib_s
    """
    frames_ = decode_xgmii(run(exe, frame_len, frames))
    if len(frames_) < frames:
        raise RuntimeError(f"{len(frames_)} frames decoded, {frames} expected")
    starts = [f.start for f in frames_[skip:]]
    period = (starts[-1] - starts[0])/(len(starts) - 1)
    gaps = ifgs(frames_[skip:])
    payload = frame_len - HEADER_LEN
    payload_bytes_s = payload/period*BYTES_PER_S
    theory = theoretical_payload_bytes_s(payload)
    return {
        "frames": frames_,
        "period": period,
        "ifgs": sorted(set(gaps)),
        "ifg_mean": sum(gaps)/len(gaps),
        "lanes": {f.lane for f in frames_},
        "frame_bytes_s": frame_len/period*BYTES_PER_S,
        "payload": payload,
        "payload_mib_s": payload_bytes_s/2**20,
        "theory_mib_s": theory/2**20,
        "pct": 100*payload_bytes_s/theory,
    }


def latency(exe, payload, frames=6):
    """Cycles from "datagram complete at the streamer input" (`close`) to its /S/ on the XGMII
    lanes, one channel at a third of the link (at most a quarter: one sample per cycle) so the
    link is idle whenever a datagram completes.
    Returns (min, max) in 156.25 MHz cycles, fractional when /S/ is in lane 4 (half a column)."""
    samples = (payload - 40)//2
    # At most one sample per cycle (a channel's 16 bits are a quarter of a column): the rate is
    # a 32-bit fraction, and more than 1 would wrap around to a slow rate.
    rate = min(2**32 - 1, int(2**32*samples/((payload + UDP_OVERHEAD)/8*3)))
    lines = run(exe, payload + HEADER_LEN, frames, rate=rate, chmask=0b1,
                max_cycles=1000 + 4*frames*(payload + 100))
    closes = [int(line.split()[1]) for line in lines if line.startswith("C ")]
    frames_ = decode_xgmii(lines)
    if len(closes) < len(frames_):
        raise RuntimeError(f"{len(frames_)} frames but only {len(closes)} datagrams completed")
    lat = [f.start/8 - c for f, c in zip(frames_, closes)]
    if min(lat) < 0:
        raise RuntimeError(f"a frame started before its datagram completed: {lat}")
    return min(lat), max(lat)


PAYLOADS = (64, 128, 256, 512, 1024, 1472, 8972)  # UDP payload bytes of the table's rows.


def main(argv=None):
    """Print a table: mac, frame bytes, UDP payload, MiB/s, theory, % of theory, IFGs, /S/ lanes,
    frames with a bad preamble or FCS. "ethdaq" is gateware/xgmiitx.py; the "gapless" rows
    measure LiteEth's XGMII PHY alone: its deficit idle count is broken in the generated Verilog
    (mean IFG < 12, so > 100% of theory) and some of its lane-4 starts corrupt frames (see
    test/gateware/test_xgmii_bench.py)."""
    import argparse
    from pathlib import Path
    parser = argparse.ArgumentParser(description="64-bit TX path throughput at the XGMII pins (Verilator)")
    parser.add_argument("--frames", type=int, default=24)
    parser.add_argument("--mac", choices=MACS, action="append", help="transmit path(s) (default: all)")
    parser.add_argument("--build-dir", default=str(Path(__file__).resolve().parents[1] / "build" / "xgmii"))
    args = parser.parse_args(argv)
    print("mac      frame  payload  MiB/s (sim)  theory MiB/s  % of theory  IFG bytes (mean)  /S/ lanes  bad frames")
    for mac in args.mac or MACS:
        exe = build_verilator(Path(args.build_dir) / mac, mac=mac)
        for payload in PAYLOADS:
            frame_len = payload + HEADER_LEN
            r = measure(exe, frame_len, args.frames if payload < 8972 else min(args.frames, 12))
            print(f"{mac:<8} {frame_len:>5}  {r['payload']:>7}  {r['payload_mib_s']:>11.3f}  "
                  f"{r['theory_mib_s']:>12.3f}  {r['pct']:>10.3f}%  "
                  f"{','.join(map(str, r['ifgs'])):>9} ({r['ifg_mean']:.2f})  "
                  f"{','.join(map(str, sorted(r['lanes']))):>9}  "
                  f"{sum(not (f.preamble_ok and f.fcs_ok) for f in r['frames'])}/{len(r['frames'])}")


if __name__ == "__main__":
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    main()
