#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Cycle-accurate measurement of the streamer through the LiteEth UDP/IP stack at the GMII pins
(Migen simulation; the GMII PHY's TX/RX registers are LiteEth's own, clocked at 125 MHz).

The testbench plays the host: it answers the stack's ARP request with a frame built by scapy
(an independent encoder), records every byte on the GMII TX pins and decodes the frames with
scapy. Used by bench/linerate.py (tables) and test/test_linerate.py (assertions).
"""

import zlib

from migen import *

from litex.gen import *

from liteeth.core import LiteEthUDPIPCore
from liteeth.phy.gmii import LiteEthPHYGMIIRX, LiteEthPHYGMIITX

from ethdaq.gateware.emulator import MODE_COUNTER, DetectorEmulator
from ethdaq.gateware.streamer import DAQStreamer
from ethdaq.gateware.timebase import Timebase

BOARD_MAC, BOARD_IP = 0x10e2d5000000, "192.168.1.50"
HOST_MAC,  HOST_IP  = "aa:b6:24:69:77:21", "192.168.1.100"
IFG = 12


class _Pads:
    def __init__(self):
        self.tx_en, self.tx_er, self.tx_data = Signal(), Signal(), Signal(8)
        self.rx_dv, self.rx_er, self.rx_data = Signal(), Signal(), Signal(8)


class _SimGMIIPHY(LiteXModule):
    """LiteEth's GMII TX/RX registers in the eth_tx/eth_rx domains (same 125 MHz as sys here)."""
    dw = 8
    tx_clk_freq = rx_clk_freq = 125e6
    with_preamble_crc = True

    def __init__(self, pads):
        self.cd_eth_tx = ClockDomain()
        self.cd_eth_rx = ClockDomain()
        self.tx = ClockDomainsRenamer("eth_tx")(LiteEthPHYGMIITX(pads))
        self.rx = ClockDomainsRenamer("eth_rx")(LiteEthPHYGMIIRX(pads))
        self.sink, self.source = self.tx.sink, self.rx.source


class StreamBench(Module):
    def __init__(self, nchannels=1, sample_width=16, max_payload=8972):
        self.pads = _Pads()
        self.submodules.phy = _SimGMIIPHY(self.pads)
        self.submodules.core = LiteEthUDPIPCore(self.phy, BOARD_MAC, BOARD_IP, clk_freq=125e6, dw=8)
        self.submodules.timebase = Timebase(125e6)
        self.submodules.streamer = DAQStreamer(nchannels=nchannels, sample_width=sample_width,
            buffer_bytes=1 << (max_payload - 1).bit_length(), timestamp=self.timebase.ns,
            max_payload=max_payload)
        port = self.core.udp.crossbar.get_port(5000, dw=8)
        self.comb += [self.streamer.source.connect(port.sink), port.source.ready.eq(1)]
        self.emulators = []
        for i in range(nchannels):
            emu = DetectorEmulator(sample_width=sample_width, seed=i + 1)
            setattr(self.submodules, f"emu{i}", emu)
            self.comb += emu.source.connect(self.streamer.sinks[i])
            self.emulators.append(emu)


def _arp_reply_wire():
    from scapy.layers.l2 import ARP, Ether
    frame = bytes(Ether(dst="10:e2:d5:00:00:00", src=HOST_MAC) /
                  ARP(op=2, hwsrc=HOST_MAC, psrc=HOST_IP, hwdst="10:e2:d5:00:00:00", pdst=BOARD_IP))
    frame = frame.ljust(60, b"\0")
    return b"\x55"*7 + b"\xd5" + frame + zlib.crc32(frame).to_bytes(4, "little")


def measure(payload, frames=8, nchannels=1, rate=2**32 - 1, sample_width=16, max_payload=8972):
    """Stream datagrams of `payload` UDP bytes and return what the GMII TX pins carried:
    {'frames': [...bytes without preamble...], 'gaps': [...], 'starts': [...], 'closes': [...]}."""
    dut = StreamBench(nchannels, sample_width, max_payload)
    tx = []        # (cycle, tx_en, tx_data)
    closes = []    # Cycles when a datagram's last sample was accepted (descriptor written).
    state = {"frames_done": 0, "prev_en": 0}
    target = frames + 2  # The first frame is the ARP request.

    def write(csr, value):
        yield csr.storage.eq(value)
        yield csr.re.eq(1)
        yield
        yield csr.re.eq(0)

    def control():
        yield from write(dut.streamer._payload, payload)
        yield from write(dut.streamer._dst_ip, 0xC0A80164)
        for emu in dut.emulators:
            yield from write(emu._mode, MODE_COUNTER)
            yield from write(emu._rate, rate)
        yield dut.streamer._control.fields.start.eq(1)
        yield
        yield dut.streamer._control.fields.start.eq(0)
        for _ in range(200000):
            if state["frames_done"] >= target:
                break
            yield
        else:
            raise RuntimeError(f"only {state['frames_done']} frames on the wire after 200000 cycles")

    @passive
    def wire():
        cycle = 0
        while True:
            yield
            cycle += 1
            en = yield dut.pads.tx_en
            tx.append((cycle, en, (yield dut.pads.tx_data)))
            if state["prev_en"] and not en:
                state["frames_done"] += 1
            state["prev_en"] = en
            for ch in dut.streamer.channels:
                if (yield ch.descs.sink.valid) and (yield ch.descs.sink.ready):
                    closes.append(cycle)

    @passive
    def host():
        # Wait for the ARP request on the wire, then answer it on RX.
        while state["frames_done"] < 1:
            yield
        for _ in range(20):
            yield
        for b in _arp_reply_wire():
            yield dut.pads.rx_dv.eq(1)
            yield dut.pads.rx_data.eq(b)
            yield
        yield dut.pads.rx_dv.eq(0)

    run_simulation(dut, [control(), wire(), host()],
                   clocks={"sys": 8, "eth_tx": 8, "eth_rx": 8})
    return _decode(tx, closes)


def _decode(tx, closes):
    frames, starts, ends = [], [], []
    cur = None
    for cycle, en, data in tx:
        if en and cur is None:
            cur, start = [], cycle
        if en:
            cur.append(data)
        elif cur is not None:
            frames.append(bytes(cur))
            starts.append(start)
            ends.append(cycle)
            cur = None
    gaps = [s - e for e, s in zip(ends, starts[1:])]
    return {"frames": frames, "starts": starts, "ends": ends, "gaps": gaps, "closes": closes}
