#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Receive errors of LiteEth's MAC, as CSRs the firmware can read.

LiteEth's MAC core counts frames with a bad preamble and frames with a bad FCS (its
RXDatapath's `preamble_errors` and `crc_errors`), but LiteEthMAC.get_csrs() returns only the
CSRs of its Wishbone interface: with the hardware UDP/IP stack (interface "crossbar") the
counters are built and never reachable. This module mirrors them.
"""

from migen import *

from litex.gen import *

from litex.soc.interconnect.csr import CSRStatus


class MACErrors(LiteXModule):
    def __init__(self, mac_core):
        self._fcs_errors      = CSRStatus(32, description="Received frames with a bad FCS (dropped by the MAC).")
        self._preamble_errors = CSRStatus(32, description="Received frames with a bad preamble or SFD (dropped by the MAC).")

        # # #

        rx = mac_core.rx_datapath
        if not hasattr(rx, "crc_errors"):
            raise ValueError("MACErrors needs LiteEth's MAC core with_preamble_crc=True (the PHY leaves framing to the MAC)")
        self.comb += [
            self._fcs_errors.status.eq(rx.crc_errors.status),
            self._preamble_errors.status.eq(rx.preamble_errors.status),
        ]
