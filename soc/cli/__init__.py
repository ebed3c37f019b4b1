#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""`ethdaq` command line, one module per command:

    boards.py    ethdaq boards      the boards a build can target
    build.py     ethdaq build       gateware, firmware, bitstream; the SoC's options
    sim.py       ethdaq sim         the simulated board in a network namespace
    load.py      ethdaq load        a bitstream into a board
    discover.py  ethdaq discover    boards answering a broadcast IDENTIFY
    exporter.py  ethdaq exporter    boards' counters for Prometheus
    ioc.py       ethdaq ioc         an EPICS IOC of boards (ethdaq.host.ioc)
    ctl.py       ethdaq ctl         a request to a board's control port
    recv.py      ethdaq recv        receiving (ethdaq.host.recv)
    merge.py     ethdaq merge       merging boards' streams from Kafka (ethdaq.host.merge)
    plot.py      ethdaq plot        plotting a run file (ethdaq.host.plot)
    common.py    what they share: usage errors, argument types, --json output

Each module has `add_parser(sub)`, which adds its subcommand with its options and its function.
"""

import argparse
import os
import signal
import sys

from ethdaq.soc.cli import boards, build, ctl, discover, exporter, ioc, load, merge, plot, recv, sim
from ethdaq.soc.cli.common import CLIError, Parser, Version

COMMANDS = [boards, build, sim, load, discover, exporter, ioc, ctl, recv, merge, plot]   # In the help's order.

EXAMPLES = """\
examples:
  ethdaq boards
  ethdaq build --board colorlight_i5
  ethdaq build --board colorlight_i5 --ip 10.0.0.2 --mac 10:e2:d5:00:00:02 --output-dir build/lab
  sudo ethdaq sim                       # boot the simulated board, print its console (Ctrl-C stops)
  sudo ethdaq sim --ping 5 --identify   # ... then identify it, ping it, and stop
  sudo ethdaq sim --identify --ping 5 --stream 10   # ... and stream emulated data for 10 s
  ethdaq load --board colorlight_i5
  ethdaq discover --broadcast 192.168.1.255   # boards on that subnet
  ethdaq ctl identify --ip 192.168.1.50
  ethdaq ctl start --ip 192.168.1.50 && ethdaq recv --duration 10
  ethdaq merge --kafka 127.0.0.1:9092 --topic detector1 -o merged.h5 --until-stop   # boards' streams by PTP time

names and addresses: --board NAME is a kind of board (build, load; `ethdaq boards` lists them);
--ip ADDR is a board's IPv4 address (build: the one it starts with; ctl: where requests go);
recv --board-ip ADDR is the board whose replies go into the run file. ctl takes --board ADDR
too, for scripts written that way.
"""


def make_parser():
    parser = Parser(prog="ethdaq", description="ethdaq: FPGA data acquisition over Ethernet (LiteX/LiteEth).",
                    epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=Version)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


# A reader that stops early (`ethdaq ... | head`): the exit status a program killed by SIGPIPE gets
# from the shell (128 + 13), as `seq 1000 | head -1` gives, so `set -o pipefail` sees the cut the
# same way. The signal's default action is not restored instead: it would kill the process
# between any two writes, before `ethdaq sim` stops the simulation and removes its namespace.
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE


def main(argv=None):
    try:
        status = _main(argv)
        sys.stdout.flush()   # Inside the try: what is still buffered can meet the closed pipe too.
        return status
    except BrokenPipeError:
        # Python's own recipe (docs of the signal module, "Note on SIGPIPE"): stdout to devnull,
        # so the interpreter's last flush at exit finds no pipe and prints no second traceback.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


def _main(argv):
    parser = make_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from ethdaq.boards import UnknownBoard
    from ethdaq.soc.build import BuildError
    from ethdaq.soc.sim import SimError
    from ethdaq.tools import ToolMissing
    try:
        return args.func(args)
    except (CLIError, UnknownBoard, BuildError, SimError, ToolMissing, ValueError) as e:
        sys.stderr.write(f"Error: {e}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("Error: interrupted\n")
        return 130


if __name__ == "__main__":
    sys.exit(main())
