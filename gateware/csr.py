#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""CSR helpers.

CSRConfig: a CSRStorage that reads back as 0. LiteX reads every CSRStorage back through the CSR
bank's read multiplexer; on the colorlight_i5 (ECP5-25F) that multiplexer is the largest single
block of the SoC (about 2400 LUTs for 121 words). Settings the firmware writes and never reads
(it keeps its own copy: rates, addresses, intervals, seeds) do not need it.
"""

from migen.fhdl.structure import _Assign

from litex.soc.interconnect.csr import CSRStorage


class CSRConfig(CSRStorage):
    """CSRStorage without read-back: written like one, reads as 0 (see the module docstring)."""
    def do_finalize(self, busword, ordering):
        CSRStorage.do_finalize(self, busword, ordering)
        reads = {id(sc.w) for sc in self.simple_csrs}
        self._fragment.comb = [s for s in self._fragment.comb
                               if not (isinstance(s, _Assign) and id(s.l) in reads)]
