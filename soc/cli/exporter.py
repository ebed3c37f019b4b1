#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""`ethdaq exporter`: boards' counters as Prometheus metrics (ethdaq.host.boardmetrics)."""

import argparse

from ethdaq.host import metrics
from ethdaq.host import argtypes
from ethdaq.host.argtypes import ipv4
from ethdaq.soc.cli.common import CLIError, port_arg, read_key


def cmd_exporter(args):
    from ethdaq.host import boardmetrics
    from ethdaq.host.metrics import MetricsError
    key = read_key(args.key_file) if args.key_file else None
    try:
        return boardmetrics.run(args.board, args.metrics, ctl_port=args.port, interval=args.interval,
                                timeout=args.timeout, key=key, duration=args.duration)
    except MetricsError as e:
        raise CLIError(str(e)) from None


def add_parser(sub):
    p = sub.add_parser("exporter", help="Prometheus metrics of boards: STATUS, streams, PTP, receive counters",
                       epilog="examples:\n  ethdaq exporter --board 192.168.1.50 --metrics 0.0.0.0:9109\n"
                              "  ethdaq exporter --board 192.168.1.50 --board 192.168.1.51 --metrics 9109 --interval 10\n"
                              "(docs/protocol.md, \"Prometheus metrics of boards\")",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--board", type=ipv4, action="append", required=True, metavar="ADDR",
                   help="a board's IPv4 address (repeat it for more)")
    p.add_argument("--port", type=port_arg, default=7000, help="the boards' control port (default 7000)")
    p.add_argument("--metrics", type=metrics.address_arg, required=True, metavar="[ADDR:]PORT",
                   help="the HTTP port to serve on (ADDR default 127.0.0.1; 0.0.0.0 for every interface)")
    p.add_argument("--interval", type=argtypes.positive("--interval"), default=5.0, metavar="S",
                   help="seconds between polls of each board (default 5)")
    p.add_argument("--timeout", type=argtypes.positive("--timeout"), default=1.0, metavar="S",
                   help="seconds per try of each request (3 tries)")
    p.add_argument("--duration", type=argtypes.positive("--duration"), metavar="S",
                   help="stop after S seconds (default: at Ctrl-C or SIGTERM)")
    p.add_argument("--key-file", metavar="FILE", help="the boards' shared key (hex): sign every request")
    p.set_defaults(func=cmd_exporter)
