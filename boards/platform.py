#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Platforms of the board files: a board gives its part, its pins, its expansion connectors (in
LiteX's form, for front-ends: gateware/connectors.py) and its oscillator; the oscillator's period
constraint (and the CRG's PLL input, boards/crg.py) follow from them."""

from litex.build.lattice import LatticeECP5Platform
from litex.build.xilinx import Xilinx7SeriesPlatform, XilinxUSPPlatform

from ethdaq.gateware.bram import ecp5_special_overrides


class ECP5BoardPlatform(LatticeECP5Platform):
    def __init__(self, device, io, clk_name, clk_freq, toolchain="trellis", connectors=()):
        self.default_clk_name   = clk_name
        self.default_clk_freq   = clk_freq  # Exact, for the PLL (1e9/period does not round-trip).
        self.default_clk_period = 1e9/clk_freq
        LatticeECP5Platform.__init__(self, device, io, connectors=list(connectors), toolchain=toolchain)

    def get_verilog(self, *args, special_overrides=dict(), **kwargs):
        # Our block RAM with DP16KD's output register (gateware/bram.py), besides LiteX's ECP5
        # lowerings.
        so = dict(ecp5_special_overrides)
        so.update(special_overrides)
        return LatticeECP5Platform.get_verilog(self, *args, special_overrides=so, **kwargs)

    def do_finalize(self, fragment):
        LatticeECP5Platform.do_finalize(self, fragment)
        self.add_period_constraint(self.lookup_request(self.default_clk_name, loose=True), self.default_clk_period)


class S7BoardPlatform(Xilinx7SeriesPlatform):
    """commands: the board's own XDC lines (configuration voltage...). Bitstreams are written for
    the boards' quad-SPI configuration flash."""
    def __init__(self, device, io, clk_name, clk_freq, toolchain="vivado", commands=(), connectors=()):
        self.default_clk_name   = clk_name
        self.default_clk_freq   = clk_freq  # Exact, for the PLL (1e9/period does not round-trip).
        self.default_clk_period = 1e9/clk_freq
        Xilinx7SeriesPlatform.__init__(self, device, io, connectors=list(connectors), toolchain=toolchain)
        for command in commands:
            self.add_platform_command(command)
        self.toolchain.bitstream_commands = ["set_property BITSTREAM.CONFIG.SPI_BUSWIDTH 4 [current_design]"]

    def do_finalize(self, fragment):
        Xilinx7SeriesPlatform.do_finalize(self, fragment)
        self.add_period_constraint(self.lookup_request(self.default_clk_name, loose=True), self.default_clk_period)


class USPBoardPlatform(XilinxUSPPlatform):
    """UltraScale+ boards, as S7BoardPlatform: the oscillator's period constraint and the
    board's own XDC lines."""
    def __init__(self, device, io, clk_name, clk_freq, toolchain="vivado", commands=(), connectors=()):
        self.default_clk_name   = clk_name
        self.default_clk_freq   = clk_freq
        self.default_clk_period = 1e9/clk_freq
        XilinxUSPPlatform.__init__(self, device, io, connectors=list(connectors), toolchain=toolchain)
        for command in commands:
            self.add_platform_command(command)

    def do_finalize(self, fragment):
        XilinxUSPPlatform.do_finalize(self, fragment)
        self.add_period_constraint(self.lookup_request(self.default_clk_name, loose=True), self.default_clk_period)
