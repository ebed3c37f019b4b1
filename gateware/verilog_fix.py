#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Signed negative constants in LiteX's Verilog output.

LiteX (2024.12) prints a negative Migen constant as `-31'd1000000000`: unary minus on an
*unsigned* literal, so in Verilog the constant is unsigned. Migen (and its simulator) treat it as
signed. The two disagree wherever the constant meets a signed operand in a sign-sensitive
operation: `add_ns > -31'd1000000000` compares unsigned in Verilog, so every positive add_ns
compared below the constant and the PTP clock rejected all positive steps on Verilator and on
hardware, while the Migen simulation (test_tsu) accepted them; `add_ns + -31'd...` into a wider
register zero-extends a negative add_ns. Printing `-31'sd1000000000` makes the literal signed, as
Migen means it: with an unsigned operand the expression is unsigned exactly as before (the literal
is sign-extended, i.e. the same bits), with a signed operand it is signed, as in simulation.

Imported by ethdaq.gateware, so every design built through ethdaq uses it.
"""

from litex.gen.fhdl import expression, verilog


def _generate_constant(node):
    return "{sign}{bits}'{s}d{value}".format(
        sign  = "" if node.value >= 0 else "-",
        bits  = str(node.nbits),
        s     = "" if node.value >= 0 else "s",
        value = abs(node.value),
    ), node.signed


def apply():
    expression._generate_constant = _generate_constant
    verilog._generate_constant    = _generate_constant


apply()
