#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Vivado I/O timing constraints (XDC) of the Ethernet PHY interfaces on Xilinx boards.

The board file states what its PHY chip guarantees at the FPGA pins (from the PHY's data sheet
and the interface standard); these helpers turn that into clocks on the PHY's clock pins and
set_input_delay / set_output_delay on its data pins, so that Vivado's timing report checks the
interface, not only the logic behind it. Not run through Vivado here (it is not installed on our
machines): the commands are the standard source-synchronous templates.
"""


def _ports(*sigs):
    # '{a} {b}' placeholders formatted by LiteX with the top-level port names; '[*]' for buses.
    return " ".join("{%s}%s" % (f"s{i}", "[*]" if len(s) > 1 else "") for i, s in enumerate(sigs))


def _clock(platform, clk, period_ns):
    # The clock is created here, not with add_period_constraint: LiteX writes those after every
    # platform command, and an XDC delay that names a clock not yet created is dropped.
    platform.add_platform_command(f"create_clock -name {{clk}} -period {period_ns:g} [get_ports {{clk}}]", clk=clk)


def _delay_operands(sigs):
    # The signals by placeholder name, the ports and the clock as XDC text.
    names = {f"s{i}": s for i, s in enumerate(sigs)}
    return names, "[get_ports {{" + _ports(*sigs) + "}}]", "[get_clocks -of_objects [get_ports {clk}]]"


def _input_delay(platform, clk, sigs, max_ns, min_ns, both_edges=False):
    names, ports, clock = _delay_operands(sigs)
    edges = [""] + ([" -clock_fall"] if both_edges else [])
    for edge in edges:
        for kind, value in (("max", max_ns), ("min", min_ns)):
            add = "" if (edge == "" and kind == "max") else " -add_delay"
            platform.add_platform_command(
                f"set_input_delay -clock {clock}{edge} -{kind} {value:g} {ports}{add}", clk=clk, **names)


def _output_delay(platform, clk, sigs, max_ns, min_ns):
    names, ports, clock = _delay_operands(sigs)
    platform.add_platform_command(f"set_output_delay -clock {clock} -max {max_ns:g} {ports}", clk=clk, **names)
    platform.add_platform_command(f"set_output_delay -clock {clock} -min {min_ns:g} {ports} -add_delay", clk=clk, **names)


def rgmii(platform, clock_pads, pads, skew_ns=0.5):
    """RGMII from a PHY that does not delay RXC (the FPGA's IDELAYE2 centres the sampling): data
    edge-aligned with RXC within +/-skew_ns (RGMII v2.0 TskewT: 0.5 ns), on both edges.

    Transmit is not constrained: TXC leaves through an ODDR clocked 90 degrees (2 ns) after the
    data ODDRs, all in the IOBs, so its timing does not depend on placement; describing that
    forwarded clock needs the ODDR's cell name, which LiteEth does not fix."""
    _clock(platform, clock_pads.rx, 8)
    _input_delay(platform, clock_pads.rx, [pads.rx_ctl, pads.rx_data], skew_ns, -skew_ns, both_edges=True)


def gmii(platform, clock_pads, pads, setup_ns=2.0, hold_ns=0.0):
    """GMII receive: data valid setup_ns before to hold_ns after RX_CLK's rising edge at the FPGA
    (IEEE 802.3 clause 35: 2.0 and 0.0 ns). Transmit (GTX_CLK forwarded by an ODDR) is not
    constrained, as for RGMII."""
    period = 8
    _clock(platform, clock_pads.rx, period)
    sigs = [pads.rx_dv, pads.rx_data] + ([pads.rx_er] if hasattr(pads, "rx_er") else [])
    _input_delay(platform, clock_pads.rx, sigs, period - setup_ns, hold_ns)


def mii(platform, clock_pads, pads, rx_min_ns=10.0, rx_max_ns=30.0, tx_setup_ns=10.0, tx_hold_ns=0.0):
    """MII (100 Mb/s): both 25 MHz clocks come from the PHY. Receive data changes rx_min_ns to
    rx_max_ns after RX_CLK rises (IEEE 802.3 clause 22: 10 to 30 ns); the PHY samples transmit data
    on TX_CLK's rising edge with tx_setup_ns / tx_hold_ns (DP83848: 10 and 0 ns)."""
    period = 40
    _clock(platform, clock_pads.rx, period)
    _clock(platform, clock_pads.tx, period)
    _input_delay(platform, clock_pads.rx, [pads.rx_dv, pads.rx_data], rx_max_ns, rx_min_ns)
    _output_delay(platform, clock_pads.tx, [pads.tx_en, pads.tx_data], tx_setup_ns, 0.0 - tx_hold_ns)
