#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""`ethdaq recv`: its options and its work are ethdaq.host.recv's; this registers the command."""

import argparse

from ethdaq.host import recv
from ethdaq.soc.cli.common import CLIError


def cmd_recv(args):
    try:
        return recv.run(args)
    except recv.RecvError as e:
        raise CLIError(str(e))


def add_parser(sub):
    p = sub.add_parser("recv", help="receive DAQ datagrams: live rates and losses, HDF5 run file, JSON summary",
                       epilog=recv.EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    recv.add_arguments(p)
    p.set_defaults(func=cmd_recv)
