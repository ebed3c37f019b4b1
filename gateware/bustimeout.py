#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Wishbone bus timeout whose answer comes from a flip-flop.

LiteX's `wishbone.Timeout` (one per shared interconnect, 1e6 cycles by default) answers an access
nobody acknowledges with all-ones data, `ack` and `error` while its 20-bit counter equals 0: that
compare is combinational into the shared bus's `ack`, and so into the CPU's data bus `ack` and
VexRiscv's pipeline. On the colorlight_i5 (LFE5U-25F-6) the sys clock's critical path started at
that counter (13 LUT levels, 15.6 ns for 15.15). RegisteredTimeout answers from a register set
when the counter reaches 0, one cycle later than LiteX's: the same answer, the counter compare out
of the acknowledge path.
"""

from contextlib import contextmanager

from migen import *

from litex.gen import *

import litex.soc.interconnect.wishbone as wishbone


class RegisteredTimeout(LiteXModule):
    """Answers an access on `master` (a wishbone.Interface) that has waited `cycles` + 1 cycles
    without `ack`: `ack`, data all ones, `error` (one cycle, for LiteX's bus error counter)."""
    def __init__(self, master, cycles):
        self.error = Signal()

        # # #

        cycles  = int(cycles)
        if cycles < 1:
            raise ValueError(f"bus timeout must be at least 1 cycle, not {cycles}")
        count   = Signal(bits_for(cycles), reset=cycles)
        expired = Signal()  # The answer, as a flip-flop.
        waiting = Signal()
        self.comb += waiting.eq(master.stb & master.cyc & ~master.ack)
        self.sync += [
            expired.eq(0),
            If(waiting,
                If(count == 0,
                    expired.eq(1),
                ).Else(
                    count.eq(count - 1),
                )
            ).Else(
                count.eq(cycles),
            )
        ]
        self.comb += If(expired,
            master.dat_r.eq(2**len(master.dat_w) - 1),
            master.ack.eq(1),
            self.error.eq(1),
        )


@contextmanager
def registered_timeout():
    """Within this block, LiteX's wishbone interconnects build a RegisteredTimeout where they
    would build a wishbone.Timeout (InterconnectShared looks the class up in its module when it
    is built)."""
    saved = wishbone.Timeout
    wishbone.Timeout = RegisteredTimeout
    try:
        yield
    finally:
        wishbone.Timeout = saved


def use_registered_timeout(bus):
    """`bus` (a LiteX SoCBusHandler, before the SoC is finalized) builds its interconnect with a
    RegisteredTimeout. The interconnect is built when the SoC is finalized (it needs every master
    and slave), so the handler's finalization is wrapped."""
    finalize = bus.do_finalize
    def do_finalize():
        with registered_timeout():
            finalize()
        timeout = getattr(bus._interconnect, "timeout", None)
        shared  = isinstance(bus._interconnect, wishbone.InterconnectShared)
        if shared and bus.timeout is not None and not isinstance(timeout, RegisteredTimeout):
            raise TypeError(f"use_registered_timeout: LiteX built {type(timeout).__name__} as the bus timeout; "
                            "this LiteX no longer builds wishbone.Timeout by name")
    bus.do_finalize = do_finalize
