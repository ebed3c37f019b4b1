#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Board registry: one module per board, each holding only board facts (pins, clocks, PHY)."""

from ethdaq.boards import (colorlight_5a_75b, colorlight_i5, digilent_arty, digilent_nexys_video,
    gsd_butterstick, lattice_versa_ecp5, sim, sim10g, xilinx_kc705, xilinx_kcu116)

BOARDS = {
    "sim":                  sim.Board,
    "sim10g":               sim10g.Board,
    # Lattice ECP5: Yosys + nextpnr (yowasp), bitstreams built here.
    "colorlight_i5":        colorlight_i5.Board,
    "colorlight_5a_75b":    colorlight_5a_75b.Board,
    "lattice_versa_ecp5":   lattice_versa_ecp5.Board,
    "gsd_butterstick":      gsd_butterstick.Board,
    # Xilinx 7-series: Vivado projects (Vivado runs where it is installed), Yosys estimates here.
    "digilent_nexys_video": digilent_nexys_video.Board,
    "xilinx_kc705":         xilinx_kc705.Board,
    "digilent_arty":        digilent_arty.Board,
    # Xilinx UltraScale+: the same, 10GBASE-R on a GTY transceiver.
    "xilinx_kcu116":        xilinx_kcu116.Board,
}


class UnknownBoard(ValueError):
    pass


def get_board(name):
    """Return the Board class for `name`, or raise UnknownBoard with the list of valid names."""
    try:
        return BOARDS[name]
    except KeyError:
        raise UnknownBoard(f"unknown board {name!r}; expected one of: {', '.join(sorted(BOARDS))}") from None
