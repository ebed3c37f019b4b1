#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""`ethdaq boards`: the boards a build can target."""


def cmd_boards(args):
    from ethdaq.boards import BOARDS
    rows = [(b.name, b.fpga, b.phy, b.link, ", ".join(b.toolchains)) for b in BOARDS.values()]
    head = ("board", "FPGA", "PHY", "link", "toolchains")
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    for r in [head] + rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return 0


def add_parser(sub):
    p = sub.add_parser("boards", help="list boards with FPGA, PHY and link speed")
    p.set_defaults(func=cmd_boards)
