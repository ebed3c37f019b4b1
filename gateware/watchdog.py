#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Watchdog and reboot: what resets the SoC, and what survives the reset.

The firmware feeds the watchdog from its main loop; if it stops feeding for `timeout` cycles while
the watchdog is enabled, or if it writes `reboot` (the control protocol's REBOOT), `reset` goes
high for RESET_CYCLES. The SoC connects `reset` to its clock and reset generator's soft reset
(boards/crg.py): every domain is reset, the clocks keep running.

Why not LiteX's Watchdog (litex/soc/cores/watchdog.py): it resets through the CRG's `rst`, which
on our CRGs (as in litex-boards) resets the PLL; if the PLL stops its outputs while in reset, the
register holding that reset stops too and the board never comes back. And it forgets why it reset.
Here the reset counter and the record of resets are reset-less: they run through the reset they
cause and tell the next boot what happened. Two more reset-less words (`retain`) keep the shared
key's last accepted counter across a reboot, so a signed request recorded before it cannot be
replayed after it (a power cycle clears them; docs/protocol.md).
"""

from migen import *

from litex.gen import *

from litex.soc.interconnect.csr import *

from ethdaq.wire import protocol

# Why the last reset happened (the `cause` CSR): the values STATUS carries (protocol.RESET_CAUSES).
CAUSE_POWER_ON = protocol.RESET_POWER_ON
CAUSE_WATCHDOG = protocol.RESET_WATCHDOG
CAUSE_REBOOT   = protocol.RESET_REBOOT

RESET_CYCLES = 16


class Watchdog(LiteXModule):
    def __init__(self, timeout_cycles, reset_cycles=RESET_CYCLES):
        if not (1 <= timeout_cycles < 2**32):
            raise ValueError(f"watchdog timeout must be 1 to 2**32-1 cycles, not {timeout_cycles!r}")
        if not (1 <= reset_cycles < 256):
            raise ValueError(f"watchdog reset must last 1 to 255 cycles, not {reset_cycles!r}")
        self.reset = Signal()

        self._control = CSRStorage(fields=[
            CSRField("enable", size=1, offset=0, description="Reset the SoC when not fed for `timeout` cycles."),
            CSRField("feed",   size=1, offset=1, pulse=True, description="Write 1: start counting `timeout` again."),
        ])
        self._timeout   = CSRStorage(32, reset=timeout_cycles, description="Cycles without a feed before the reset.")
        self._remaining = CSRStatus(32, description="Cycles left before the watchdog resets the SoC.")
        self._reboot    = CSRStorage(fields=[
            CSRField("reboot", size=1, pulse=True, description="Write 1: reset the SoC now."),
        ])
        self._cause     = CSRStatus(2,  description="Why the last reset happened: 0 power-on, 1 watchdog, 2 reboot.")
        self._boots     = CSRStatus(16, description="Resets since power-on (watchdog and reboot), saturating.")
        self._watchdog_resets = CSRStatus(16, description="Resets by the watchdog since power-on, saturating.")
        self._retain    = CSRStorage(64, description="Kept across resets (not across a power cycle).")

        # # #

        # Survivors of the reset they cause.
        hold   = Signal(max=reset_cycles + 1, reset_less=True)
        cause  = Signal(2,  reset_less=True)
        boots  = Signal(16, reset_less=True)
        wdt    = Signal(16, reset_less=True)
        self._retain.storage.reset_less = True
        self.comb += [
            self._cause.status.eq(cause),
            self._boots.status.eq(boots),
            self._watchdog_resets.status.eq(wdt),
        ]

        # Data-Path: count down while enabled; a feed (or the enable) loads the timeout.
        remaining = Signal(32, reset=timeout_cycles)
        enabled   = Signal()
        self.sync += [
            enabled.eq(self._control.fields.enable),
            If(self._control.fields.feed | (self._control.fields.enable & ~enabled),
                remaining.eq(self._timeout.storage)
            ).Elif(enabled & (remaining != 0),
                remaining.eq(remaining - 1)
            ),
        ]
        self.comb += self._remaining.status.eq(remaining)

        # Control-Path: a timeout or a reboot request starts the reset; it is recorded once.
        expired = Signal()
        request = Signal()
        self.comb += [
            expired.eq(enabled & (remaining == 0)),
            request.eq(self._reboot.fields.reboot),
            self.reset.eq(hold != 0),
        ]
        self.sync += [
            If(hold != 0,
                hold.eq(hold - 1)
            ).Elif(expired | request,
                hold.eq(reset_cycles),
                cause.eq(Mux(expired, CAUSE_WATCHDOG, CAUSE_REBOOT)),
                If(boots != 2**16 - 1, boots.eq(boots + 1)),
                If(expired & (wdt != 2**16 - 1), wdt.eq(wdt + 1)),
            ),
        ]
