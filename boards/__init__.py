#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Board registry: one module per board, each holding only board facts (pins, clocks, PHY)."""

from ethdaq.boards import colorlight_i5, sim

BOARDS = {
    "sim":           sim.Board,
    "colorlight_i5": colorlight_i5.Board,
}


class UnknownBoard(ValueError):
    pass


def get_board(name):
    """Return the Board class for `name`, or raise UnknownBoard with the list of valid names."""
    try:
        return BOARDS[name]
    except KeyError:
        raise UnknownBoard(f"unknown board {name!r}; expected one of: {', '.join(sorted(BOARDS))}") from None
