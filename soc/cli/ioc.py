#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""`ethdaq ioc`: an EPICS IOC of boards; its options and its work are ethdaq.host.ioc's, this
registers the command."""

import argparse

from ethdaq.host import ioc


def add_parser(sub):
    p = sub.add_parser("ioc", help=ioc.HELP, epilog=ioc.EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    ioc.add_arguments(p)
    p.set_defaults(func=ioc.main)
