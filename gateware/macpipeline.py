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
context on the LFE5U-25F-6). gateware/cdcfifo.py's LevelFIFO (unbuffered) reads at a registered
address instead; `replace_tx_cdc` puts it in the crossing's place, same depth, first-word
fall-through as before.

On the receive side, LiteEth's FCS checker judged a frame from the CRC after its last byte, in
that byte's cycle, into the last byte's `error` and the clock enable of its error counter's pulse
synchronizer: eth_rx's critical path in the colorlight_i5's full SoC. `replace_rx_crc` puts
gateware/fcschecker.py's FCSChecker in its place, which judges the CRC register a cycle later.
"""

from migen import ClockDomainsRenamer
from migen.fhdl.structure import _Assign

from litex.soc.interconnect import stream

from liteeth.common import eth_phy_description
from liteeth.mac.crc import LiteEthMACCRC32Checker

from ethdaq.gateware.cdcfifo import LevelFIFO
from ethdaq.gateware.fcschecker import FCSChecker


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
    datapath._submodules = [(name, m) for name, m in datapath._submodules if m is not old]
    datapath.submodules += new


def insert_tx_buffer(mac_core):
    """A buffer (registered valid and ready) right after the transmit clock-domain crossing of
    `mac_core` (a LiteEthMACCore with its 8-bit datapath in eth_tx, with_sys_datapath False),
    before it is finalized. Returns the buffer."""
    pipeline = mac_core.tx_datapath.pipeline
    i = _tx_cdc_index(pipeline, "insert_tx_buffer")
    dw = len(pipeline[i].source.data)
    buf = ClockDomainsRenamer("eth_tx")(stream.Buffer(eth_phy_description(dw), pipe_valid=True, pipe_ready=True))
    pipeline.insert(i + 1, buf)
    return buf


def replace_tx_cdc(mac_core, depth=32):
    """Replace the transmit clock-domain crossing of `mac_core` (sys to eth_tx, as
    insert_tx_buffer needs it) by a LevelFIFO of `depth` entries (LiteEth's own default depth),
    before the core is finalized. Call insert_tx_buffer first: it finds LiteEth's crossing.
    Returns the new crossing."""
    pipeline = mac_core.tx_datapath.pipeline
    i   = _tx_cdc_index(pipeline, "replace_tx_cdc")
    old = pipeline[i]
    dw  = len(old.source.data)
    cdc = LevelFIFO(eth_phy_description(dw), depth, cd_write="sys", cd_read="eth_tx")
    pipeline[i] = cdc
    _swap(mac_core.tx_datapath, old, cdc)
    return cdc


def replace_rx_crc(mac_core):
    """Replace the FCS checker of `mac_core` (a LiteEthMACCore with its 8-bit datapath in eth_rx,
    with_preamble_crc True) by an FCSChecker, before the core is finalized: in its pipeline, and
    as the source of its FCS error counter's pulse. Returns the new checker."""
    datapath = mac_core.rx_datapath
    pipeline = datapath.pipeline
    olds = [i for i, m in enumerate(pipeline) if isinstance(m, LiteEthMACCRC32Checker)]
    if len(olds) != 1 or len(pipeline[olds[0]].sink.data) != 8:
        raise ValueError("replace_rx_crc needs LiteEth's MAC core with its FCS checker at 8 bits "
                         "(with_preamble_crc=True, with_sys_datapath=False)")
    i   = olds[0]
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
