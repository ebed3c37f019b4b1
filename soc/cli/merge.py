#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""`ethdaq merge`: its options and its work are ethdaq.host.merge's; this registers the command."""

import argparse
import sys

from ethdaq.host import merge


def cmd_merge(args):
    try:
        return merge.run(args)
    except merge.MergeError as e:
        sys.stderr.write(f"Error: {e}\n")
        return e.status


def add_parser(sub):
    p = sub.add_parser("merge", help="consume many boards' streams from Kafka, write time slices by PTP time (NeXus)",
                       epilog=merge.EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    merge.add_arguments(p)
    p.set_defaults(func=cmd_merge)
