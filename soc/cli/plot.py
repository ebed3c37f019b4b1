#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""`ethdaq plot`: its options and its work are ethdaq.host.plot's; this registers the command."""

import argparse

from ethdaq.host import plot


def cmd_plot(args):
    return plot.run(args)


def add_parser(sub):
    p = sub.add_parser("plot", help="plot a run file: data rate, timestamp spacing, waveform excerpt",
                       epilog="example:\n  ethdaq plot run.h5 -o run.png",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    plot.add_arguments(p)
    p.set_defaults(func=cmd_plot)
