#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""`ethdaq discover`: IDENTIFY to a broadcast address, every board that answers listed."""

import argparse
import json
import sys

from ethdaq.host import argtypes
from ethdaq.host.argtypes import ipv4
from ethdaq.soc.cli.common import CLIError, identity_fields, port_arg


def cmd_discover(args):
    from ethdaq.host.ctl import discover
    if args.timeout <= 0:
        raise CLIError(f"--timeout must be a positive number of seconds, not {args.timeout:g}")
    try:
        found = discover(args.broadcast, args.port, timeout=args.timeout)
    except OSError as e:
        raise CLIError(f"cannot send to {args.broadcast}:{args.port}: {e.strerror} "
                       f"(a directed broadcast needs an interface on that subnet)") from None
    if args.json:
        print(json.dumps([dict(identity_fields(ident), answered_from=ip) for ip, ident in found]))
        return 0
    if not found:
        print(f"no board answered IDENTIFY at {args.broadcast}:{args.port} within {args.timeout:g} s",
              file=sys.stderr)
        return 1
    rows = [(ip, ident.mac_str, ident.board, ident.build_id, f"udp/{ident.ctl_port}") for ip, ident in found]
    head = ("ip", "mac", "board", "build", "control")
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    for r in [head] + rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return 0


def add_parser(sub):
    p = sub.add_parser("discover", help="find boards: IDENTIFY to a broadcast address, every answer listed",
                       epilog="examples:\n  ethdaq discover\n  ethdaq discover --broadcast 192.168.1.255 --json",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--broadcast", type=ipv4, default="255.255.255.255", metavar="ADDR",
                   help="where IDENTIFY goes: 255.255.255.255 (the default) or a subnet's directed broadcast "
                        "such as 192.168.1.255, which leaves by the interface on that subnet (255.255.255.255 by the "
                        "default route's)")
    p.add_argument("--port", type=port_arg, default=7000, help="control port (default 7000)")
    p.add_argument("--timeout", type=argtypes.positive("--timeout"), default=1.0, metavar="S",
                   help="seconds to collect answers (default 1)")
    p.add_argument("--json", action="store_true", help="print JSON: a list, one entry per board")
    p.set_defaults(func=cmd_discover)
