#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Clock and reset generators shared by the board files: the board names its oscillator, its
reset button and what its PHY needs; the PLL set-up is the same on every board of a family.

`rst` (LiteX's convention, and the reset button) resets the PLL. `soft_rst` (the watchdog's,
gateware/watchdog.py) resets the sys domain only, with the clock running: the reset is held by a
register in sys, which would stop with the PLL's outputs and hold the PLL in reset for good."""

from migen import *

from litex.gen import *

from migen.genlib.resetsync import AsyncResetSynchronizer

from litex.soc.cores.clock import ECP5PLL, S7PLL, S7IDELAYCTRL, USPMMCM


class ECP5CRG(LiteXModule):
    """sys from the board oscillator (the platform's default clock) through the ECP5 PLL; held in
    reset while the (active-low) reset button is pressed."""
    def __init__(self, platform, sys_clk_freq, rst_n_name=None):
        self.rst      = Signal()
        self.soft_rst = Signal()
        self.cd_sys   = ClockDomain()

        # # #

        clk   = platform.request(platform.default_clk_name)
        rst_n = platform.request(rst_n_name) if rst_n_name else 1
        self.pll = pll = ECP5PLL()
        self.comb += pll.reset.eq(~rst_n | self.rst)
        pll.register_clkin(clk, platform.default_clk_freq)
        pll.create_clkout(self.cd_sys, sys_clk_freq, with_reset=False)
        self.specials += AsyncResetSynchronizer(self.cd_sys, ~pll.locked | self.soft_rst)


class S7CRG(LiteXModule):
    """sys from the board oscillator (the platform's default clock) through a 7-series PLL.

    with_idelay: a 200 MHz reference and the IDELAYCTRL that the fixed IDELAYE2 delays of
    LiteEth's RGMII receiver need. eth_ref_clk_name: a pin that feeds the PHY its 25 MHz
    reference (MII PHYs without their own crystal, e.g. the Arty's DP83848J)."""
    def __init__(self, platform, sys_clk_freq, rst_name=None, rst_active_low=False,
        speedgrade=-1, with_idelay=False, eth_ref_clk_name=None):
        self.rst      = Signal()
        self.soft_rst = Signal()
        self.cd_sys   = ClockDomain()

        # # #

        clk = platform.request(platform.default_clk_name)
        rst = 0
        if rst_name:
            rst = platform.request(rst_name)
            rst = ~rst if rst_active_low else rst
        self.pll = pll = S7PLL(speedgrade=speedgrade)
        self.comb += pll.reset.eq(rst | self.rst)
        pll.register_clkin(clk, platform.default_clk_freq)
        pll.create_clkout(self.cd_sys, sys_clk_freq, with_reset=False)
        self.specials += AsyncResetSynchronizer(self.cd_sys, ~pll.locked | self.soft_rst)
        platform.add_false_path_constraints(self.cd_sys.clk, pll.clkin)
        if with_idelay:
            self.cd_idelay = ClockDomain()
            pll.create_clkout(self.cd_idelay, 200e6)
            self.idelayctrl = S7IDELAYCTRL(self.cd_idelay)
        if eth_ref_clk_name:
            self.cd_eth_ref = ClockDomain(reset_less=True)
            pll.create_clkout(self.cd_eth_ref, 25e6)
            self.comb += platform.request(eth_ref_clk_name).eq(self.cd_eth_ref.clk)


class USPCRG(LiteXModule):
    """sys from the board oscillator (the platform's default clock) through an UltraScale+ MMCM;
    held in reset while the (active-high) reset button is pressed."""
    def __init__(self, platform, sys_clk_freq, rst_name=None, speedgrade=-2):
        self.rst      = Signal()
        self.soft_rst = Signal()
        self.cd_sys   = ClockDomain()

        # # #

        clk = platform.request(platform.default_clk_name)
        rst = platform.request(rst_name) if rst_name else 0
        self.pll = pll = USPMMCM(speedgrade=speedgrade)
        self.comb += pll.reset.eq(rst | self.rst)
        pll.register_clkin(clk, platform.default_clk_freq)
        pll.create_clkout(self.cd_sys, sys_clk_freq, with_reset=False)
        self.specials += AsyncResetSynchronizer(self.cd_sys, ~pll.locked | self.soft_rst)
        platform.add_false_path_constraints(self.cd_sys.clk, pll.clkin)
