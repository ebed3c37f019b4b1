#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""PHY-side transmit path: the DAQ data path beside LiteEth's MAC, merged at frame boundaries.

    Launcher (time-triggered, optional) ───────────────────────────────────────────┐ class 0
    LiteEth MAC (ARP, ICMP, control, PTP) ─────────────────────────────────────────┤ class 1
    streamer ─► register ─► UDPFramer ─► register ─┐                               │
    ARPRequester ─► register ──────────────────────┴► FCS and preamble ────────────┴► FrameScheduler ─► IFG ─► register ─► PHY
                                                                     class 2 (bulk)   strict priority at frame
                                                                                      boundaries: a waiting frame is delayed by at
                                                                                      most the one frame already on the line

At 64 bits with ethdaq's XGMII PHY (gateware/xgmiiphy.py) the PHY makes preamble, padding and
FCS itself (no FCS and preamble stage here, none in LiteEth's MAC) and keeps the gap, and
LiteEth's frames pass a store-and-forward FIFO before the scheduler (`tx_gapless`).

LiteEth is given `mac_phy`, a stand-in PHY: its frames (with preamble and FCS, as the real PHY
wants them) come out of `mac_phy.sink` into the scheduler, and received frames pass from the
real PHY to LiteEth untouched. LiteEth's own IFG inserter is turned off (the scheduler's one
holds the gap between frames of any source). Everything here runs in the PHY's transmit
domain `eth_tx`.
"""

from migen import *

from litex.gen import *

from litex.soc.interconnect import stream
from litex.soc.interconnect.packet import PacketFIFO

from liteeth.common import convert_ip, eth_interpacket_gap, eth_phy_description, eth_udp_user_description
from liteeth.mac.crc import LiteEthMACCRC32Inserter
from liteeth.mac.gap import LiteEthMACGap
from liteeth.mac.preamble import LiteEthMACPreambleInserter
from liteeth.phy.mii import LiteEthPHYMIITX

from ethdaq.gateware.framer import ARPRequester, UDPFramer
from ethdaq.gateware.mactx import MACTransmitter
from ethdaq.gateware.regbuffer import RegisteredBuffer
from ethdaq.gateware.scheduler import FrameScheduler


# Words of LiteEth's frames a `tx_gapless` PHY's store-and-forward FIFO holds: its 1530-byte MTU
# at 64 bits, rounded up to a power of two.
MAC_FRAME_WORDS = 256


class MACPHY:
    """What LiteEthMACCore needs of a PHY: dw, sink, source and its framing options, those of
    `phy`; without one (tests and benches of the MAC core alone), an 8-bit PHY that wants the
    preamble, FCS and padding from the MAC."""
    def __init__(self, phy=None):
        self.dw = phy.dw if phy is not None else 8
        self.sink   = stream.Endpoint(eth_phy_description(self.dw))
        self.source = stream.Endpoint(eth_phy_description(self.dw))
        self.with_preamble_crc = getattr(phy, "with_preamble_crc", True)
        self.with_padding      = getattr(phy, "with_padding", True)
        self.integrated_ifg_inserter = True  # The scheduler's IFG inserter serves all sources.


def cycles_per_byte(phy):
    """eth_tx cycles `phy` takes for a byte at its pins: 2 for LiteEth's MII PHY (a nibble per
    25 MHz cycle through its 8-to-4 converter), 1 for the others (GMII, RGMII: a byte per
    cycle; XGMII keeps the gap itself)."""
    return 2 if isinstance(getattr(phy, "tx", None), LiteEthPHYMIITX) else 1


class InterFrameGap(LiteXModule):
    """The 12-byte inter-frame gap for a PHY that takes `cycles_per_byte` cycles per byte.

    LiteEthMACGap holds 12 cycles after the PHY accepts a frame's last byte. On MII that byte
    still has a nibble to send and every byte takes two cycles, so the gap at the pins was 11
    nibbles, 5.5 byte times (bench/gmii.py phy="mii", test/gateware/test_mii.py): receivers may drop a
    frame that follows another that closely. Here the gap is counted in the PHY's cycles: 12
    byte times, plus the cycles the PHY still needs for the last byte. (A byte-wide PHY keeps
    LiteEthMACGap, whose count is right for it.)"""
    def __init__(self, dw, cycles_per_byte):
        self.sink   = sink   = stream.Endpoint(eth_phy_description(dw))
        self.source = source = stream.Endpoint(eth_phy_description(dw))

        # # #

        self.cycles = cycles = eth_interpacket_gap*cycles_per_byte + (cycles_per_byte - 1)
        counter = Signal(max=cycles)
        self.fsm = fsm = FSM(reset_state="COPY")
        fsm.act("COPY",
            NextValue(counter, 0),
            sink.connect(source),
            If(sink.valid & sink.last & sink.ready, NextState("GAP")),
        )
        fsm.act("GAP",
            NextValue(counter, counter + 1),
            If(counter == cycles - 1, NextState("COPY")),
        )


class TXPath(LiteXModule):
    """Inputs (eth_tx): `data` (UDP datagrams), `dst_mac`/`dst_valid`, `arp_request`/`arp_target`,
    `announce` (an ARP announcement of our address). `launcher` (gateware/launcher.py, in cd_tx):
    time-triggered frames, the highest class, with its guard-band `hold`. `mac_address` and `ip_address` are ints or
    Signals in cd_tx (gateware/netaddr.py: changeable at run time); `announced` is high for the
    cycle an announcement has gone."""
    # Cycles from a frame's first byte offered to the scheduler's input 0 (the launcher) to that
    # byte at the PHY's sink: scheduler and gap (combinational), phy_reg. The PHY's own latency to
    # its pins comes on top (gateware/tsu.py PHY_FPGA_LATENCY_CYCLES).
    launch_cycles = 1

    def __init__(self, phy, mac_address, ip_address, cd_tx="eth_tx", launcher=None):
        dw = phy.dw
        if isinstance(ip_address, str):
            ip_address = convert_ip(ip_address)
        if dw not in (8, 64):
            raise ValueError(f"TXPath: PHY data width must be 8 (GMII/RGMII) or 64 (XGMII), not {dw!r}")
        self.mac_phy     = mac_phy = MACPHY(phy)
        self.data        = stream.Endpoint(eth_udp_user_description(dw))
        self.dst_mac     = Signal(48)
        self.dst_valid   = Signal()
        self.arp_request = Signal()
        self.arp_target  = Signal(32)
        self.announce    = Signal()
        self.announced   = Signal()

        # # #

        # Receive: straight to LiteEth. LiteEth's 8-bit PHYs (GMII, RGMII, MII) leave last_be at 0,
        # and its FCS checker then checks nothing (its CRC engine is selected by last_be): a frame
        # with a bad FCS went up the stack as good and was never counted. Mark the last byte valid.
        self.comb += phy.source.connect(mac_phy.source)
        if dw == 8:
            self.comb += mac_phy.source.last_be.eq(phy.source.last)

        r = ClockDomainsRenamer(cd_tx)
        self.framer    = framer    = r(UDPFramer(mac_address, ip_address, dw=dw))
        self.requester = requester = r(ARPRequester(mac_address, ip_address, dw=dw))
        # Registered valid, data and ready between the streamer and the framer (one cycle): the
        # streamer's header and sample multiplexers and the framer's header multiplexer would
        # otherwise share a cycle, and the framer's ready chain would reach into the streamer's
        # state machine and buffers. The streamer's `ready` is a flip-flop (RegisteredBuffer):
        # its serializer's end-of-datagram and load logic, 4 LUT levels and their routes, runs
        # from it.
        self.data_buf = data_buf = r(RegisteredBuffer(eth_udp_user_description(dw)))
        self.comb += [
            self.data.connect(data_buf.sink),
            data_buf.source.connect(framer.sink),
            framer.dst_mac.eq(self.dst_mac),
            framer.mac_valid.eq(self.dst_valid),
            requester.request.eq(self.arp_request),
            requester.target_ip.eq(self.arp_target),
            requester.announce.eq(self.announce),
            self.announced.eq(requester.announced),
        ]

        # Our frames: ARP request before data (it is rare and data may be waiting for it).
        # The framer's output is registered (one cycle): its header mux and the streamer's FIFO
        # reads behind it would otherwise share a cycle with the schedulers and the CRC.
        self.local = local = r(FrameScheduler(2, dw, idle_choice=1))
        # Registered `ready` too: the schedulers' ready chain then ends here instead of running
        # on through the framer into the streamer's buffer (eth_tx's critical path on ECP5 after
        # the schedulers' choice was registered, 12.9 ns).
        self.framer_reg = framer_reg = r(RegisteredBuffer(eth_phy_description(dw)))
        # The ARP requester's frame multiplexer, registered (it fed the CRC in one cycle).
        self.requester_reg = requester_reg = r(RegisteredBuffer(eth_phy_description(dw)))
        self.comb += [
            requester.source.connect(requester_reg.sink),
            requester_reg.source.connect(local.sinks[0]),
            framer.source.connect(framer_reg.sink),
            framer_reg.source.connect(local.sinks[1]),
        ]
        # A PHY whose transmitter makes preamble, padding and FCS itself (`tx_framing`,
        # gateware/xgmiiphy.py) takes our frames as the scheduler gives them.
        framed = mac_phy.with_preamble_crc and not getattr(phy, "tx_framing", False)
        if framed and dw == 8:
            # FCS and preamble in one stage with registered outputs (gateware/mactx.py), as in
            # LiteEth's MAC core (gateware/macpipeline.py replace_tx_framing).
            self.mactx = mactx = r(MACTransmitter(with_padding=True))
            self.submodules += stream.Pipeline(local, mactx)
            ours = mactx.source
        elif framed:
            self.crc      = crc      = r(LiteEthMACCRC32Inserter(eth_phy_description(dw)))
            self.preamble = preamble = r(LiteEthMACPreambleInserter(dw))
            # A register between the CRC and the preamble (one cycle): the preamble inserter's,
            # the schedulers' and the gap's valid/ready chain would otherwise run on through the
            # CRC into the local scheduler's inputs.
            self.crc_buf  = crc_buf  = r(RegisteredBuffer(eth_phy_description(dw)))
            self.submodules += stream.Pipeline(local, crc, crc_buf, preamble)
            ours = preamble.source
        else:
            ours = local.source

        # Frame-boundary merge with LiteEth, then the inter-frame gap (unless the PHY keeps it,
        # as LiteEth's XGMII PHY does), then the PHY.
        # LiteEth's frames through a buffer with registered valid and ready: its MAC transmit
        # path is combinational in `ready` back into its clock-crossing FIFO's read side, which
        # with the scheduler's grant logic makes a 12.7 ns eth_tx path on ECP5 without it.
        # Classes, highest first: time-triggered launches (if any), LiteEth (the CPU's control
        # and PTP messages, ARP and ICMP answers), the bulk DAQ data.
        sources = ([launcher.source] if launcher is not None else [])
        self.mac_buffer = mac_buffer = r(RegisteredBuffer(eth_phy_description(dw)))
        sources += [mac_buffer.source, ours]
        self.scheduler = scheduler = r(FrameScheduler(len(sources), dw, idle_choice=len(sources) - 1))
        if getattr(phy, "tx_gapless", False):
            # A PHY that cannot wait inside a frame (`tx_gapless`: gateware/xgmiitx.py sends a
            # missing word as /E/) gets LiteEth's frames whole: they cross from sys, which may be
            # slower than the PHY (125 MHz against XGMII's 156.25 MHz), word by word. Ours come
            # whole from the streamer's buffers.
            self.mac_frames = mac_frames = r(PacketFIFO(eth_phy_description(dw), payload_depth=MAC_FRAME_WORDS))
            self.comb += [mac_phy.sink.connect(mac_frames.sink), mac_frames.source.connect(mac_buffer.sink)]
        else:
            self.comb += mac_phy.sink.connect(mac_buffer.sink)
        self.comb += [s.connect(scheduler.sinks[i]) for i, s in enumerate(sources)]
        if launcher is not None:
            self.comb += scheduler.hold.eq(launcher.hold)
        # A register right before the PHY: LiteEth's ECP5 and 7-series RGMII PHYs feed their
        # output DDR registers straight from `sink`, so without it the whole path above plus the
        # route to the I/O pins is one cycle (eth_tx's worst path on the ECP5 Versa, 3.5 ns of it
        # the route to the pad).
        # A PHY whose pins come from its own flip-flops (`registered_outputs`, gateware/xgmiitx.py)
        # needs no such register: one cycle less to the wire (`launch_cycles` is then 0).
        stages = [scheduler]
        if not getattr(phy, "registered_outputs", False):
            self.phy_reg = phy_reg = r(stream.PipeValid(eth_phy_description(dw)))
            stages.append(phy_reg)
        if not getattr(phy, "integrated_ifg_inserter", False):
            cpb = cycles_per_byte(phy)
            self.gap = gap = r(LiteEthMACGap(dw) if cpb == 1 else InterFrameGap(dw, cpb))
            stages.insert(1, gap)
        self.submodules += stream.Pipeline(*stages, phy)


def connect_streamer(module, streamer, txpath, ethcore=None):
    """Wire a DAQStreamer (built with the TXPath's cd_tx) to a TXPath, and LiteEth's ARP receiver
    to the streamer's resolver (observed, not consumed; without `ethcore` nothing answers ARP, so
    only a fixed or rule-mapped destination works). LiteEth's ARP RX presents each accepted frame
    for exactly one cycle and ignores `ready` (its table may miss it when busy), so the resolver
    samples `valid` alone; it passes only frames whose target IP is ours, with the opcode the
    resolver needs to tell an answer (reply) from a claim (request)."""
    module.comb += [
        streamer.source.connect(txpath.data),
        txpath.dst_mac.eq(streamer.dst_mac),
        txpath.dst_valid.eq(streamer.dst_valid),
        txpath.arp_request.eq(streamer.arp_request),
        txpath.arp_target.eq(streamer.arp_target),
    ]
    if ethcore is not None:
        arp = ethcore.arp.rx.source
        module.comb += [
            streamer.arp_valid.eq(arp.valid & (arp.reply | arp.request)),
            streamer.arp_reply.eq(arp.reply),
            streamer.arp_ip.eq(arp.ip_address),
            streamer.arp_mac.eq(arp.mac_address),
        ]
