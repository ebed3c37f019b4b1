#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Register stages in LiteEth's MAC core datapaths, where its own modules chain combinational
logic across several of them (docs/liteeth-notes.md).

LiteEth's MAC transmit datapath (8-bit PHYs: clock-domain crossing, padding inserter, FCS
inserter, preamble inserter, in eth_tx) passes `ready` combinationally from the preamble
inserter's state back through the FCS inserter and the padding inserter into the read side of
the crossing's FIFO (its read address and the distributed RAM behind it): on ECP5 that was
eth_tx's critical path once the receive side was pipelined (7.8 ns, 6 LUT levels). A buffer with
registered valid and ready right after the crossing cuts it; it adds one cycle to every frame
LiteEth sends, none to its throughput.

Behind that buffer, the crossing itself was the next: Migen's AsyncFIFO reads its distributed RAM
through a synchronous port at the *next* read address, which is computed from `re` in the same
cycle, so the buffer's `ready` ran through the gray counter's increment into the RAM's address
and out of the RAM into the read register (7.6 ns, 6 LUT levels, eth_tx's critical path out of
context on the LFE5U-25F-6). And it passes bytes on as they come: with sys slower than the PHY
(60 MHz on the ECP5 boards, 8 bits a cycle against 125 MHz) it runs empty inside every frame and
TX_EN drops mid-frame (gateware/framefifo.py). `replace_tx_cdc` puts gateware/framefifo.py's
FrameFIFO in its place: store-and-forward, 2048 bytes in one block RAM, read at a registered
address.

At 64 bits (the 10G boards, the datapath in sys), the receive crossing from the PHY's clock into a
slower sys is LiteEth's AsyncFIFO, which loses the words that find it full while the rest of
their frame goes on; `replace_rx_cdc` puts gateware/framecrossing.py's FrameCrossing in its
place, which drops such a frame whole and counts it.

On the receive side, LiteEth's FCS checker judged a frame from the CRC after its last byte, in
that byte's cycle, into the last byte's `error` and the clock enable of its error counter's pulse
synchronizer: eth_rx's critical path in the colorlight_i5's full SoC. `replace_rx_crc` puts
gateware/fcschecker.py's FCSChecker in its place, which judges the CRC register a cycle later.
"""

from migen import ClockDomainsRenamer
from migen.fhdl.structure import _Assign

from litex.soc.interconnect import stream

from liteeth.common import eth_phy_description
from liteeth.mac.crc import LiteEthMACCRC32Checker, LiteEthMACCRC32Inserter
from liteeth.mac.padding import LiteEthMACPaddingInserter
from liteeth.mac.preamble import LiteEthMACPreambleInserter

from ethdaq.gateware.framecrossing import FrameCrossing
from ethdaq.gateware.framefifo import FrameFIFO
from ethdaq.gateware.mactx import MACTransmitter
from ethdaq.gateware.fcschecker import FCSChecker
from ethdaq.gateware.framespacer import FrameSpacer
from ethdaq.gateware.regbuffer import RegisteredBuffer


def _tx_cdc_index(pipeline, who):
    """Where LiteEth's transmit crossing (sys to eth_tx) is in a MAC core's transmit pipeline:
    right after its sink when the datapath is in eth_tx (with_sys_datapath False)."""
    cdcs = [i for i, m in enumerate(pipeline) if isinstance(m, stream.ClockDomainCrossing)]
    if len(cdcs) != 1 or cdcs[0] != 1:
        raise ValueError(f"{who} needs LiteEth's MAC core with its datapath in eth_tx (with_sys_datapath=False)")
    return cdcs[0]


def _swap(datapath, old, new):
    """`new` in `old`'s place among `datapath`'s submodules. `old` is a submodule of the datapath
    already (LiteEth adds each stage as it builds it): out of it, or it would be built
    unconnected."""
    _drop(datapath, old)
    datapath.submodules += new


def _drop(datapath, old):
    """`old` out of `datapath`'s submodules (replaced along with another stage)."""
    datapath._submodules = [(name, m) for name, m in datapath._submodules if m is not old]


def insert_tx_buffer(mac_core):
    """A buffer (registered valid and ready) right after the transmit clock-domain crossing of
    `mac_core` (a LiteEthMACCore with its 8-bit datapath in eth_tx, with_sys_datapath False),
    before it is finalized. Returns the buffer."""
    pipeline = mac_core.tx_datapath.pipeline
    i = _tx_cdc_index(pipeline, "insert_tx_buffer")
    dw = len(pipeline[i].source.data)
    buf = ClockDomainsRenamer("eth_tx")(RegisteredBuffer(eth_phy_description(dw)))
    pipeline.insert(i + 1, buf)
    return buf


def replace_tx_cdc(mac_core, depth=2048):
    """Replace the transmit clock-domain crossing of `mac_core` (sys to eth_tx, as
    insert_tx_buffer needs it) by a FrameFIFO of `depth` bytes (store-and-forward: a frame leaves
    only once all of it is in), before the core is finalized. Call insert_tx_buffer first: it
    finds LiteEth's crossing. Returns the new crossing."""
    pipeline = mac_core.tx_datapath.pipeline
    i   = _tx_cdc_index(pipeline, "replace_tx_cdc")
    old = pipeline[i]
    if len(old.source.data) != 8:
        raise ValueError("replace_tx_cdc needs LiteEth's MAC core at 8 bits (dw=8)")
    cdc = FrameFIFO(depth, cd_write="sys", cd_read="eth_tx")
    pipeline[i] = cdc
    _swap(mac_core.tx_datapath, old, cdc)
    return cdc


def _rx_crc_index(pipeline, dw, error):
    """Where LiteEth's FCS checker is in a MAC core's receive pipeline, if there is one and it is
    `dw` bits wide; else ValueError(error)."""
    found = [i for i, m in enumerate(pipeline) if isinstance(m, LiteEthMACCRC32Checker)]
    if len(found) != 1 or len(pipeline[found[0]].sink.data) != dw:
        raise ValueError(error)
    return found[0]


def replace_rx_crc(mac_core):
    """Replace the FCS checker of `mac_core` (a LiteEthMACCore with its 8-bit datapath in eth_rx,
    with_preamble_crc True) by an FCSChecker, before the core is finalized: in its pipeline, and
    as the source of its FCS error counter's pulse. Returns the new checker."""
    datapath = mac_core.rx_datapath
    pipeline = datapath.pipeline
    i   = _rx_crc_index(pipeline, 8, "replace_rx_crc needs LiteEth's MAC core with its FCS checker at 8 bits "
                                     "(with_preamble_crc=True, with_sys_datapath=False)")
    old = pipeline[i]
    # LiteEth's counter: `ps.i.eq(rx_crc.error)` among the datapath's combinatorial statements.
    comb   = datapath._fragment.comb
    drives = [j for j, st in enumerate(comb) if isinstance(st, _Assign) and st.r is old.error]
    if len(drives) != 1:
        raise ValueError(f"replace_rx_crc: LiteEth's FCS error pulse is driven {len(drives)} times, expected once")
    new = ClockDomainsRenamer("eth_rx")(FCSChecker())
    pipeline[i] = new
    comb[drives[0]] = comb[drives[0]].l.eq(new.error)
    _swap(datapath, old, new)
    return new


def replace_rx_cdc(mac_core, depth):
    """Put a FrameCrossing of `depth` words in place of the receive crossing (eth_rx to sys) of
    `mac_core` (LiteEth's MAC core with its datapath in sys: a 64-bit PHY), before the core is
    finalized: a frame that finds no room is dropped whole and counted, where LiteEth's crossing
    loses the words that find it full and the rest of the frame goes on. Returns it."""
    pipeline = mac_core.rx_datapath.pipeline
    cdcs = [i for i, m in enumerate(pipeline) if isinstance(m, stream.ClockDomainCrossing)]
    if len(cdcs) != 1:
        raise ValueError("replace_rx_cdc needs LiteEth's MAC core with its receive crossing in the datapath "
                         "(with_sys_datapath=True)")
    old = pipeline[cdcs[0]]
    new = FrameCrossing(eth_phy_description(len(old.sink.data)), depth, "eth_rx", "sys")
    pipeline[cdcs[0]] = new
    _swap(mac_core.rx_datapath, old, new)
    return new


def space_rx_crc(mac_core, cd):
    """A FrameSpacer of two cycles right before LiteEth's FCS checker at 64 bits (in clock domain
    `cd`), before the core is finalized: its checker drops the first word of a frame that follows
    a frame ending in 5 to 8 bytes by less (gateware/framespacer.py). Returns the spacer."""
    pipeline = mac_core.rx_datapath.pipeline
    i = _rx_crc_index(pipeline, 64, "space_rx_crc needs LiteEth's MAC core with its FCS checker at 64 bits (with_preamble_crc=True)")
    spacer = ClockDomainsRenamer(cd)(FrameSpacer(eth_phy_description(64), cycles=2))
    pipeline.insert(i, spacer)
    mac_core.rx_datapath.submodules += spacer
    return spacer


def replace_tx_framing(mac_core):
    """Replace the padding, FCS and preamble inserters of `mac_core`'s transmit pipeline (8-bit
    datapath in eth_tx, with_preamble_crc and with_padding) by one MACTransmitter, before the core
    is finalized. Returns it."""
    datapath = mac_core.tx_datapath
    pipeline = datapath.pipeline
    kinds = (LiteEthMACPaddingInserter, LiteEthMACCRC32Inserter, LiteEthMACPreambleInserter)
    found = [i for i, m in enumerate(pipeline) if isinstance(m, kinds)]
    if (len(found) != 3 or found != list(range(found[0], found[0] + 3))
            or not all(isinstance(pipeline[i], k) for i, k in zip(found, kinds))
            or len(pipeline[found[0]].sink.data) != 8):
        raise ValueError("replace_tx_framing needs LiteEth's MAC core with its padding, FCS and preamble "
                         "inserters in a row at 8 bits (with_padding, with_preamble_crc, with_sys_datapath=False)")
    olds = pipeline[found[0]:found[0] + 3]
    new  = ClockDomainsRenamer("eth_tx")(MACTransmitter())
    pipeline[found[0]:found[0] + 3] = [new]
    for old in olds[1:]:
        _drop(datapath, old)
    _swap(datapath, olds[0], new)
    return new


def cut_connection(module, source, sink, buffer):
    """Put `buffer` (a LiteX stream buffer) on the connection `source.connect(sink)` that
    `module` made among its combinatorial statements (a LiteEth layer wiring its parts together),
    before it is finalized. The connection's statements are taken out and the two halves are
    returned, for the caller to add beside `buffer`."""
    expected = source.connect(sink)
    pairs = {(id(st.l), id(st.r)) for st in expected}
    comb  = module._fragment.comb
    found = [j for j, st in enumerate(comb) if isinstance(st, _Assign) and (id(st.l), id(st.r)) in pairs]
    if len(found) != len(expected):
        raise ValueError(f"cut_connection: {len(found)} of the connection's {len(expected)} statements "
                         f"found in {type(module).__name__}; LiteEth no longer wires it this way")
    for j in reversed(found):
        del comb[j]
    return [source.connect(buffer.sink), buffer.source.connect(sink)]


def insert_ip_rx_buffer(ip):
    """A buffer with registered valid, payload and `ready` between LiteEth's IPv4 receiver and
    its IPv4 crossbar (`ip`: a LiteEthIP), before it is finalized. Returns (buffer, statements to
    add).

    LiteEth's receive path passes `ready` combinationally from the ICMP echo FIFO and the UDP
    layer's depacketizers through the IPv4 crossbar, the IPv4 receiver and its depacketizer, the
    MAC crossbar and the MAC depacketizer into the buffer after the MAC's receive crossing: 13
    LUT levels and carry chains, 15.8 ns on the colorlight_i5 without this buffer, as long as
    sys's critical path there. Its forward half matters as much: the IPv4 total length, less the IPv4 header in
    the receiver and the ICMP header in ICMP's, goes through two subtractors into ICMP's state
    machine and from there back along `ready` (16 levels, 14.6 ns on the colorlight_i5 without
    this buffer, in nextpnr's timing report), so a buffer with registered `ready` only
    (PipeReady, whose payload passes through) would leave most of it. One cycle of latency for
    what LiteEth receives over IPv4, and no loss of rate."""
    from liteeth.common import eth_ipv4_user_description
    buf = stream.Buffer(eth_ipv4_user_description(len(ip.rx.source.data)), pipe_valid=True, pipe_ready=True)
    return buf, cut_connection(ip, ip.rx.source, ip.crossbar.master.sink, buf)


def drop_tx_framing(mac_core):
    """Take the FCS and preamble inserters out of `mac_core`'s transmit pipeline, before the core is
    finalized, for a PHY whose transmitter makes them itself (`tx_framing`, gateware/xgmiiphy.py).
    Its padding inserter stays (the PHY pads too: a frame it gets at 60 bytes is left as it is).
    Returns the two stages taken out."""
    datapath = mac_core.tx_datapath
    pipeline = datapath.pipeline
    olds = [m for m in pipeline if isinstance(m, (LiteEthMACCRC32Inserter, LiteEthMACPreambleInserter))]
    if [type(m) for m in olds] != [LiteEthMACCRC32Inserter, LiteEthMACPreambleInserter]:
        raise ValueError("drop_tx_framing needs LiteEth's MAC core with its FCS and preamble inserters "
                         "(with_preamble_crc)")
    for old in olds:
        pipeline.remove(old)
        _drop(datapath, old)
    return olds
