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
"""

from migen import ClockDomainsRenamer

from litex.soc.interconnect import stream

from liteeth.common import eth_phy_description

from ethdaq.gateware.cdcfifo import LevelFIFO


def _tx_cdc_index(pipeline, who):
    """Where LiteEth's transmit crossing (sys to eth_tx) is in a MAC core's transmit pipeline:
    right after its sink when the datapath is in eth_tx (with_sys_datapath False)."""
    cdcs = [i for i, m in enumerate(pipeline) if isinstance(m, stream.ClockDomainCrossing)]
    if len(cdcs) != 1 or cdcs[0] != 1:
        raise ValueError(f"{who} needs LiteEth's MAC core with its datapath in eth_tx (with_sys_datapath=False)")
    return cdcs[0]


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
    # The old crossing is a submodule of the datapath already: out of it, or its FIFO would be
    # built unconnected.
    datapath = mac_core.tx_datapath
    datapath._submodules = [(name, m) for name, m in datapath._submodules if m is not old]
    datapath.submodules += cdc
    return cdc
