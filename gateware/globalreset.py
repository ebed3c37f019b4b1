#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Clock domain resets on the ECP5's global network.

A LiteX clock domain's reset comes out of an AsyncResetSynchronizer (two FD1S3BX on ECP5) and
goes to the LSR pin of every flip-flop of the domain that has a reset: thousands of loads.
nextpnr-ecp5 promotes clocks to the global network by itself, not resets, so each reset is
routed through the fabric. On the colorlight_i5's SoC built on an LFE5U-45F-6 (half full) the
eth_tx reset was the eth critical path: 9.88 ns of routing from the synchroniser to one
flip-flop, for 7.27; and router1 did not converge. With a DCCA (the ECP5's clock buffer) after
the synchroniser the reset reaches its loads on a global line, as a clock does; nextpnr routes
every DCCA output on the global network.
"""

from migen import *
from migen.genlib.resetsync import AsyncResetSynchronizer


def promote_resets(module):
    """Put the reset of every clock domain synchronised by an AsyncResetSynchronizer among
    `module`'s own specials (a CRG: LiteX's convention) on an ECP5 global, before the module is
    finalized. Returns the names of the domains. The synchroniser stays (it drives the DCCA), so
    the reset still asserts asynchronously and releases on the domain's clock."""
    promoted = []
    # Specials are a set: in creation order, so that the same design gives the same netlist.
    syncs = sorted((s for s in module._fragment.specials if isinstance(s, AsyncResetSynchronizer)),
                   key=lambda s: s.duid)
    for special in syncs:
        cd  = special.cd
        pre = ClockDomain(f"{cd.name}_rst_sync")  # The synchroniser's own, not a domain of the design.
        module._fragment.specials.remove(special)
        module.comb += pre.clk.eq(cd.clk)
        module.specials += [
            AsyncResetSynchronizer(pre, special.async_reset),
            Instance("DCCA", name=f"{cd.name}_rst_dcca", i_CLKI=pre.rst, i_CE=1, o_CLKO=cd.rst),
        ]
        promoted.append(cd.name)
    return promoted
