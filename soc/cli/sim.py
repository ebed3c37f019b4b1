#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""`ethdaq sim`: build and run the simulated board in a network namespace of its own, then, if
asked, identify it, ping it and stream from it."""

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

from ethdaq.host import argtypes
from ethdaq.host.argtypes import ipv4
from ethdaq.soc import ctlargs
from ethdaq.soc.cli.build import add_network_options, add_output_options, soc_config
from ethdaq.soc.cli.common import CLIError, board_class
from ethdaq.wire.protocol import EMULATOR_RATE_DEFAULT


def _sigterm_as_interrupt(signum, frame):
    # SIGTERM cleans up like Ctrl-C: stop the simulation, remove the namespace.
    raise KeyboardInterrupt


def _demo_stream(session, args):
    """Emulated detector data (or the front-end's) from the board to a receiver in the namespace,
    for args.stream seconds."""
    ctl = [sys.executable, "-m", "ethdaq.soc.cli", "ctl"]
    board = ["--ip", args.ip, "--port", str(args.ctl_port)]
    print(f"\n$ ethdaq recv --port 5000 --duration {args.stream:g} &   (inside namespace {args.netns})", flush=True)
    recv = subprocess.Popen(["ip", "netns", "exec", args.netns, sys.executable, "-m", "ethdaq.soc.cli", "recv",
                             "--port", "5000", "--duration", str(args.stream)])
    try:
        # A front-end build has no emulators: its own logic makes the samples.
        emulator = [] if args.frontend else [["emulator", "--mode", "counter", "--rate", str(args.stream_rate)]]
        for cmd in (*emulator, ["start", "--dst-port", "5000", "--payload", str(args.payload)]):
            print(f"$ ethdaq ctl {' '.join(cmd)} --ip {args.ip}", flush=True)
            r = session.ns_run(ctl + cmd + board)
            if r.returncode:
                return r.returncode
        recv.wait(timeout=args.stream + 60)
    finally:
        if recv.poll() is None:
            recv.terminate()
            recv.wait()
    print("(rates are wall-clock rates of the simulation, which runs far slower than a board;\n"
          " cycle-accurate line-rate figures: docs/results.md)", flush=True)
    print(f"$ ethdaq ctl stop --ip {args.ip}", flush=True)
    return session.ns_run(ctl + ["stop"] + board).returncode | recv.returncode


def _check_demo_stream(board, args):
    """--stream's settings against the simulated board, before its build: the payload it takes,
    and a warning when the emulators would make more than its link carries."""
    from ethdaq.host import linkbudget
    from ethdaq.wire.protocol import MIN_PAYLOAD
    if args.payload > board.max_payload:
        raise CLIError(f"--payload must be from {MIN_PAYLOAD} to {board.max_payload} (the simulated board's max payload), "
                       f"not {args.payload}")
    if args.frontend:
        return
    budget = linkbudget.Budget(channels=args.channels or 4, sample_bits=args.sample_width, rate=args.stream_rate,
                               sys_clk_hz=board.sys_clk_freq, payload=args.payload,
                               link_mbps=ctlargs.link_mbps(board=board))
    text = linkbudget.warning(budget)
    if text:
        print(f"warning: {text}", file=sys.stderr, flush=True)


def sim_board(name):
    """The simulated board `name` (`ethdaq sim --board`); CLIError for any other board."""
    from ethdaq.boards import BOARDS
    names = sorted(n for n, b in BOARDS.items() if b.is_sim)
    board = board_class(name)
    if not board.is_sim:
        raise CLIError(f"--board must be a simulated board ({', '.join(names)}), not {name!r}")
    return board


def cmd_sim(args):
    from ethdaq.soc import build, sim
    board = sim_board(args.board)
    sim.check_addresses(args.ip, args.host_ip)
    if args.stream:
        _check_demo_stream(board, args)
    sim.check_can_run(args.netns)  # Fail before the (long) build.
    output_dir = Path(args.output_dir or os.path.join("build", board.name))
    config = soc_config(args, board)
    build.preflight(board, output_dir)
    log = output_dir / "build.log"
    print(f"building the simulated board in {output_dir} (log: {log}) ...", flush=True)
    with build.output_to(log, args.verbose, show_progress=not args.quiet):
        result = build.build_sim(board, output_dir, config=config)
    build.write_sim_config(board, result.artifact.parent.parent, args.tap, args.host_ip)
    print(f"starting the simulation in network namespace {args.netns!r} "
          f"(tap {args.tap} {args.host_ip}/24, board {args.ip})", flush=True)
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    status = 0
    with sim.SimSession(result.artifact.parent.parent, netns=args.netns,
                        log=output_dir / "console.log") as session:
        try:
            session.wait_for("ethdaq ready", timeout=args.boot_timeout)
            if args.identify:
                print(f"\n$ ethdaq ctl identify --ip {args.ip}   (inside namespace {args.netns})", flush=True)
                r = session.ns_run([sys.executable, "-m", "ethdaq.soc.cli", "ctl", "identify",
                                    "--ip", args.ip, "--port", str(args.ctl_port)])
                status |= r.returncode
            if args.stream:
                status |= _demo_stream(session, args)
            if args.ping:
                print(f"\n$ ping -c {args.ping} {args.ip}   (inside namespace {args.netns})", flush=True)
                r = session.ns_run(["ping", "-c", str(args.ping), "-W", "5", args.ip])
                status |= r.returncode
            if args.duration is not None:
                session.proc.wait(timeout=args.duration) if args.duration > 0 else session.proc.wait()
            elif not (args.ping or args.identify or args.stream):
                print("(Ctrl-C stops the simulation and removes the namespace)", flush=True)
                session.proc.wait()
        except subprocess.TimeoutExpired:
            pass
        except KeyboardInterrupt:
            print("\nstopping", flush=True)
    print(f"simulation stopped; namespace {args.netns!r} removed")
    return 1 if status else 0


def add_parser(sub):
    p = sub.add_parser("sim", help="build and run the simulated board in a private network namespace (root)",
                       epilog="examples:\n  sudo ethdaq sim --ping 5 --identify\n"
                              "  sudo ethdaq sim --board sim10g --ping 5 --stream 5",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--board", default="sim",
                   help="simulated board: sim (1G, GMII) or sim10g (10G, XGMII) (default sim; see 'ethdaq boards')")
    add_network_options(p)
    p.add_argument("--host-ip", type=ipv4, default="192.168.1.100", help="address of the tap inside the namespace (default 192.168.1.100)")
    p.add_argument("--netns", default="ethdaq", help="network namespace to create (default ethdaq)")
    p.add_argument("--tap", default="ethdaq0", help="tap interface name inside the namespace (default ethdaq0)")
    p.add_argument("--output-dir", help="build directory (default build/BOARD)")
    add_output_options(p)
    p.add_argument("--pin-probe", action="store_true",
                   help="print the cycle of every control frame at the GMII pins on the console (bench/ctllatency.py)")
    p.add_argument("--ping", type=argtypes.positive("--ping", int, zero=True), default=0, metavar="N",
                   help="after boot, ping the board N times")
    p.add_argument("--identify", action="store_true", help="after boot, send an identify request")
    p.add_argument("--stream", type=argtypes.positive("--stream", zero=True), default=0, metavar="S",
                   help="after boot, stream emulated detector data to a receiver in the namespace for S seconds")
    p.add_argument("--stream-rate", type=ctlargs.rate, default=EMULATOR_RATE_DEFAULT, metavar="R",
                   help=f"emulator samples per clock cycle per channel for --stream, 0..1 (default "
                        f"{EMULATOR_RATE_DEFAULT:g}; the link carries 1 byte a cycle, headers included: a warning "
                        f"gives the arithmetic when channels x sample bytes x R exceed it)")
    p.add_argument("--payload", type=ctlargs.setting("payload"), default=1472,
                   help="UDP payload bytes per datagram for --stream (default 1472)")
    p.add_argument("--duration", type=argtypes.positive("--duration", zero=True), metavar="S",
                   help="stop after S seconds (default: after --ping/--identify, else on Ctrl-C)")
    p.add_argument("--boot-timeout", type=argtypes.positive("--boot-timeout"), default=120, metavar="S",
                   help="seconds to wait for the firmware banner")
    p.set_defaults(func=cmd_sim)
