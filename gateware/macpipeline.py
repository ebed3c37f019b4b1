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
"""

from migen import ClockDomainsRenamer

from litex.soc.interconnect import stream

from liteeth.common import eth_phy_description


def insert_tx_buffer(mac_core):
    """A buffer (registered valid and ready) right after the transmit clock-domain crossing of
    `mac_core` (a LiteEthMACCore with its 8-bit datapath in eth_tx, with_sys_datapath False),
    before it is finalized. Returns the buffer."""
    pipeline = mac_core.tx_datapath.pipeline
    cdcs = [i for i, m in enumerate(pipeline) if isinstance(m, stream.ClockDomainCrossing)]
    if len(cdcs) != 1 or cdcs[0] != 1:
        raise ValueError("insert_tx_buffer needs LiteEth's MAC core with its datapath in eth_tx (with_sys_datapath=False)")
    dw = len(pipeline[cdcs[0]].source.data)
    buf = ClockDomainsRenamer("eth_tx")(stream.Buffer(eth_phy_description(dw), pipe_valid=True, pipe_ready=True))
    pipeline.insert(cdcs[0] + 1, buf)
    return buf
