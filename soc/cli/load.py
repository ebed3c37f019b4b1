#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""`ethdaq load`: a bitstream into the board, with openFPGALoader."""

import os
import subprocess
from pathlib import Path

from ethdaq.soc.cli.common import CLIError, board_class


def cmd_load(args):
    from ethdaq import tools
    board = board_class(args.board)
    if board.is_sim:
        raise CLIError("board 'sim' is simulated and cannot be loaded; run 'sudo ethdaq sim'")
    if board.loader is None:
        raise CLIError(f"openFPGALoader cannot load {board.name} ({board.fpga}); load the bitstream with "
                       f"Vivado's hardware manager")
    bitstream = Path(args.bitstream or os.path.join(args.output_dir or os.path.join("build", board.name),
                                                    "gateware", f"{board.name}.bit"))
    if not bitstream.exists():
        raise CLIError(f"bitstream {str(bitstream)!r} not found; build it first with 'ethdaq build --board {board.name}'")
    tools.require("openFPGALoader")
    how = ["--cable", args.cable] if args.cable else board.loader
    cmd = ["openFPGALoader", *how, str(bitstream)]
    print("$ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd)
    if r.returncode != 0:
        raise CLIError(f"openFPGALoader failed with exit code {r.returncode} (board connected? {' '.join(how)}?)")
    return 0


def add_parser(sub):
    p = sub.add_parser("load", help="load a bitstream into the board with openFPGALoader")
    p.add_argument("--board", required=True, help="board name")
    p.add_argument("--bitstream", help="bitstream (default build/BOARD/gateware/BOARD.bit)")
    p.add_argument("--output-dir", help="build directory the bitstream is in")
    p.add_argument("--cable", help="openFPGALoader cable (default: the board's)")
    p.set_defaults(func=cmd_load)
