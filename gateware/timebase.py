#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Free-running nanosecond time base, the timestamp source until the PTP timestamp unit exists.
Timestamps from it are flagged as not PTP (daqformat.FLAG_TS_PTP clear)."""

from migen import *

from litex.gen import *


class Timebase(LiteXModule):
    def __init__(self, clk_freq, frac_bits=24):
        self.ns = Signal(64)  # Nanoseconds since reset.
        self.ns_next = Signal(64)  # What `ns` is in the next cycle.

        # # #

        # Period as integer ns plus a binary fraction, so 60 MHz (16.67 ns) does not drift.
        period = 1e9/clk_freq
        step   = round(period*2**frac_bits)
        self.step_ns, self.step_frac = step >> frac_bits, step & (2**frac_bits - 1)
        frac  = Signal(frac_bits)
        carry = Signal()
        self.comb += carry.eq((frac + self.step_frac) >> frac_bits)
        self.comb += self.ns_next.eq(self.ns + self.step_ns + carry)
        self.sync += [
            frac.eq(frac + self.step_frac),
            self.ns.eq(self.ns_next),
        ]
