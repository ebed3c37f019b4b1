#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""One-hot state machines on the ECP5: Migen FSMs marked for Yosys' FSM recoding.

Yosys re-encodes the state machines it finds (`fsm` in synth_ecp5), but it skips every state
register with an initial value, and LiteX's Verilog gives every register one: the build log says
"Not marking ... as FSM state register: Register has an initialization value" for each of
LiteEth's and our state machines, which therefore stay binary-coded, their next-state logic a
decoder of the whole state in front of every transition (the PTP parser's state was the end of
eth's critical path in the colorlight_i5's full SoC). With the `fsm_encoding` attribute Yosys
takes the register anyway and recodes it one-hot, ignoring the initial value (it says so).

That is safe where the state machine's domain is reset before it runs, as every domain of our
ECP5 SoCs is (the CRGs hold their resets until the PLL locks; LiteEth's PHY CRG resets the PHY
domains at power-up): the reset puts the recoded register in the reset state's code. A
reset-less domain would start with no state bit set. `check_reset(verilog, names)` checks, in the
generated Verilog, that each marked register is assigned its reset value under a domain reset.
"""

import re
from contextlib import contextmanager

from migen.genlib.fsm import FSM

ATTRIBUTE = ("fsm_encoding", "one-hot")


@contextmanager
def one_hot_fsms(marked=None):
    """Every Migen FSM finalized inside the block gets its state register marked; `marked`, a
    list, receives the state signals."""
    original = FSM.do_finalize

    def do_finalize(self):
        original(self)
        if len(self.actions) > 2:   # Two states: one flip-flop already.
            self.state.attr.add(ATTRIBUTE)
            if marked is not None:
                marked.append(self.state)

    FSM.do_finalize = do_finalize
    try:
        yield
    finally:
        FSM.do_finalize = original


def marked_registers(verilog):
    """Names of the registers the Verilog marks one-hot."""
    return re.findall(r'\(\*\s*fsm_encoding\s*=\s*"one-hot"\s*\*\)\s*reg\s*(?:\[[^\]]*\]\s*)?(\w+)', verilog)


def check_reset(verilog):
    """Raise ValueError naming each marked register that no domain reset assigns (it would start
    in no state after configuration). Returns the marked names."""
    names = marked_registers(verilog)
    # LiteX writes a domain's resets at the end of its always block: `if (<cd>_rst) begin ... end`.
    reset_blocks = re.findall(r"if \((\w+_rst)\) begin\n(.*?)\n\s*end\n", verilog, flags=re.S)
    reset = set()
    for _, body in reset_blocks:
        reset.update(re.findall(r"(\w+) <= ", body))
    missing = [n for n in names if n not in reset]
    if missing:
        raise ValueError("one-hot state registers without a domain reset (they would start in no "
                         f"state): {', '.join(missing)}")
    return names
