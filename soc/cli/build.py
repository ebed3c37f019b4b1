#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""`ethdaq build`: gateware, firmware and bitstream (or the simulation binary) from the SoC's
options, which `ethdaq sim` shares (add_network_options, soc_config)."""

import argparse
import os
import sys
from pathlib import Path

from ethdaq.host.argtypes import int_in, ipv4
from ethdaq.soc import pnr, progress
from ethdaq.soc.cli.common import (CLIError, allow_arg, board_class, build_id_arg, freq_arg, gateway_arg,
                                   log_interval, mac_arg, netmask_arg, port_arg, ptp_domain, read_key,
                                   sample_width)


def add_network_options(p):
    from ethdaq.soc.socconfig import DEFAULT_CTL_PORT, DEFAULT_ETHERBONE_PORT, DEFAULT_IP, DEFAULT_MAC
    from ethdaq.wire.protocol import MAX_STREAMS
    p.add_argument("--ip",  type=ipv4,  default=DEFAULT_IP,  help=f"board IPv4 address (default {DEFAULT_IP})")
    p.add_argument("--netmask", type=netmask_arg, metavar="MASK",
                   help="the board's subnet, as a prefix length (24) or a mask (255.255.255.0): the board answers "
                        "discovery on its directed broadcast, e.g. 192.168.1.255 (default: the address's class, "
                        "as ifconfig's: /8 below 128.0.0.0, /16 below 192.0.0.0, else /24)")
    p.add_argument("--gateway", type=gateway_arg, default=0, metavar="IP",
                   help="default gateway, a host of the board's subnet: streams and answers to addresses outside "
                        "the subnet go to its MAC (default none: every destination is asked for by ARP directly)")
    p.add_argument("--dhcp", action="store_true",
                   help="the firmware asks a DHCP server for its address, netmask and gateway, renews the lease and "
                        "keeps --ip (--netmask, --gateway) until it has one and after one ends (docs/protocol.md)")
    p.add_argument("--dhcp-time-scale", type=int_in(1, 100000, "DHCP time scale"), metavar="N",
                   help="simulated board only: lease seconds per simulated second (default 1000: a lease second "
                        "is 1 ms of simulated time, about a wall-clock second)")
    p.add_argument("--mac", type=mac_arg, default=DEFAULT_MAC, help=f"board MAC address (default {DEFAULT_MAC})")
    p.add_argument("--ctl-port", type=port_arg, default=DEFAULT_CTL_PORT,
                   help=f"firmware control UDP port (default {DEFAULT_CTL_PORT})")
    p.add_argument("--ctl-key-file", metavar="FILE",
                   help="shared key (hex, 16-64 bytes) the board requires on requests that change it "
                        "(HMAC-SHA256); it is built into the firmware, keep the build directory private")
    p.add_argument("--ctl-allow", type=allow_arg, default="", metavar="NET[,NET...]",
                   help="addresses that may control the board, e.g. 192.168.1.0/24,10.0.0.7 (default: any; "
                        "the first to claim it holds it, docs/protocol.md)")
    p.add_argument("--with-etherbone", action="store_true",
                   help="DEBUG ONLY: raw bus access over UDP (LiteX's litex_server --udp) for anyone on the network, "
                        "past the controller, allow-list and key; the build, the firmware and identify say so")
    p.add_argument("--etherbone-port", type=port_arg, default=DEFAULT_ETHERBONE_PORT,
                   help=f"UDP port of --with-etherbone (default {DEFAULT_ETHERBONE_PORT})")
    g = p.add_argument_group("real-time services (docs/realtime.md)")
    g.add_argument("--with-classifier", action="store_true",
                   help="receive rules and the frame gate in front of LiteEth (only whole, good frames reach the "
                        "stack); about 800 more LUT4 on ECP5, so off by default")
    g.add_argument("--fasttrack-port", type=port_arg, action="append", default=[], metavar="PORT",
                   help="UDP port whose datagrams go to the hardware fast-track sink, never to the CPU "
                        "(repeatable, up to 4; implies --with-classifier)")
    g.add_argument("--with-launcher", action="store_true",
                   help="time-triggered transmission: a frame launched when the PTP clock reaches a given time, "
                        "once or periodically, ahead of all other traffic (docs/realtime.md)")
    g.add_argument("--with-probes", action="store_true",
                   help="latency probes on every frame: transmit classes (launch, CPU, bulk DAQ) handed over to "
                        "the pins; receive, from the pins to the fast-track sink, LiteEth's UDP port and the CPU "
                        "(with the classifier); count, mean, sigma, min, max, histogram (docs/realtime.md)")
    g = p.add_argument_group("data path (docs/boards/README.md: what each profile costs)")
    g.add_argument("--channels", metavar="N",
                   type=int_in(1, MAX_STREAMS, "channels", why="the control protocol's channel mask is 8 bits"),
                   help="stream channels, each with its own detector emulator and buffer, 1 to 8 (default 4; "
                        "with --frontend, the channels the front-end drives)")
    g.add_argument("--sample-width", type=sample_width, metavar="BITS", default=16,
                   help="bits per sample on every channel: 8, 16, 32 or 64 (default 16)")
    g = p.add_argument_group("detector front-end (docs/frontends.md)")
    g.add_argument("--frontend", metavar="PATH",
                   help="your own front-end (a Python file defining frontend(ctx)) drives the stream "
                        "channels instead of the detector emulators")
    g = p.add_argument_group("PTP (docs/ptp-firmware.md)")
    g.add_argument("--ptp-role", choices=["auto", "master", "slave"], default="auto",
                   help="auto: the best master clock algorithm decides (default); master: always master; slave: never master")
    g.add_argument("--ptp-transport", choices=["udp", "l2"], default="udp",
                   help="udp: UDP/IPv4 to 224.0.1.129 ports 319/320 (default); l2: Ethernet, EtherType 0x88F7")
    g.add_argument("--ptp-domain", type=ptp_domain, default=0, help="PTP domainNumber (default 0)")
    g.add_argument("--ptp-log-sync", type=log_interval, metavar="N",
                   help="Sync interval 2^N s as master, -10..6 (default 0: 1 s, as ptp4l; simulated board -7)")
    g.add_argument("--ptp-log-announce", type=log_interval, metavar="N",
                   help="Announce interval 2^N s as master, -10..6 (default 1: 2 s, as ptp4l; simulated board -7)")
    g.add_argument("--ptp-log-delay-req", type=log_interval, metavar="N",
                   help="minimum Delay_Req interval 2^N s, -10..6 (default 0: 1 s, as ptp4l; simulated board -7)")
    g.add_argument("--ptp-status-full", action="store_true",
                   help="the console's periodic PTP line (state, offset, path delay) is followed by the full "
                        "status line with every counter (default: the full line only at a state change)")


def add_output_options(p):
    """What a build shows while it runs (`ethdaq build`, `ethdaq sim`)."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("--verbose", action="store_true",
                   help="show the build's output instead of writing it to OUTPUT_DIR/build.log")
    g.add_argument("--quiet", action="store_true",
                   help="show no progress while the build runs (by default: the stage, its time and the tools' "
                        "progress, on a terminal in one line updated in place, otherwise a line at each stage and "
                        f"every {progress.PLAIN_INTERVAL_S} s; README.md)")


def soc_config(args, board):
    """The SoC's options (`ethdaq build`, `ethdaq sim`) as a SoCConfig, checked against `board`
    before anything is built: a one-line error for what the build would refuse."""
    from ethdaq.soc.socconfig import ETHERBONE_WARNING, SoCConfig
    if getattr(args, "frontend", None) and args.channels is not None:
        raise CLIError(f"--channels: a front-end's channels are those it drives ({args.frontend} decides)")
    options = dict(ip_address=args.ip, netmask=args.netmask, gateway=args.gateway, mac_address=args.mac,
                   with_dhcp=args.dhcp, dhcp_time_scale=args.dhcp_time_scale, ctl_port=args.ctl_port,
                   ctl_allow=args.ctl_allow or (),
                   ctl_key=read_key(args.ctl_key_file) if args.ctl_key_file else None,
                   sample_width=args.sample_width,
                   ptp_role=args.ptp_role, ptp_transport=args.ptp_transport, ptp_domain=args.ptp_domain,
                   ptp_log_sync=args.ptp_log_sync, ptp_log_announce=args.ptp_log_announce,
                   ptp_log_delay_req=args.ptp_log_delay_req, ptp_status_full=args.ptp_status_full,
                   with_classifier=args.with_classifier, fasttrack_ports=tuple(args.fasttrack_port),
                   with_launcher=args.with_launcher, with_probes=args.with_probes,
                   with_etherbone=args.with_etherbone, etherbone_port=args.etherbone_port,
                   with_pin_probe=getattr(args, "pin_probe", False),
                   sys_clk_freq=getattr(args, "sys_clk_freq", None), build_id=getattr(args, "build_id", None))
    if args.channels is not None:
        options["nchannels"] = args.channels
    if getattr(args, "frontend", None):
        from ethdaq.gateware.frontend import load
        options["frontend"] = load(args.frontend)
    config = SoCConfig(**options)
    try:
        config.resolve(board)
    except ValueError as e:
        raise CLIError(str(e)) from None
    if config.with_etherbone:
        print(ETHERBONE_WARNING.format(port=config.etherbone_port), file=sys.stderr, flush=True)
    return config


def cmd_build(args):
    from ethdaq.soc import build
    board = board_class(args.board)
    toolchain = args.toolchain or board.toolchains[0]
    if toolchain not in board.toolchains:
        raise CLIError(f"toolchain for board {board.name} must be one of {', '.join(board.toolchains)}, not {toolchain!r}")
    output_dir = Path(args.output_dir or os.path.join("build", board.name))
    build.check_placement_options(board, toolchain, args.seed, args.tries)
    config = soc_config(args, board)
    if args.no_compile and board.is_sim:
        raise CLIError("--no-compile is for hardware boards; the simulated board's build is its Verilator binary")
    build.preflight(board, output_dir)
    log = output_dir / "build.log"
    print(f"building {board.name} in {output_dir} (log: {log}) ...", flush=True)
    if board.is_sim:
        with build.output_to(log, args.verbose, show_progress=not args.quiet):
            result = build.build_sim(board, output_dir, config=config)
        print(f"simulation binary: {result.artifact}")
        print(f"firmware:          {result.firmware}")
        print("run it with: sudo ethdaq sim")
        return 0
    with build.output_to(log, args.verbose, show_progress=not args.quiet):
        result = build.build_hardware(board, output_dir, config=config, toolchain=toolchain, seed=args.seed,
                                      tries=args.tries, run=not args.no_compile)
    if args.no_compile:
        print(f"project:   {result.gateware} (self-contained: it can be moved or copied); to build it, "
              f"run: {build.project_command(result)}")
        print(f"firmware:  {result.firmware}")
        return 0
    if result.vivado_missing:
        print(f"Vivado is not on PATH: the complete project is in {result.gateware} (self-contained: copy it to "
              f"where Vivado is installed); run: {build.vivado_command(result)}")
        return 0
    print()
    print(f"ethdaq build summary: {board.name} ({board.fpga})")
    print(build.format_summary(result.report))
    print()
    if result.artifact:
        print(f"bitstream: {result.artifact}")
    else:
        print(f"project:   {result.gateware} (Vivado: {build.vivado_command(result)})")
    print(f"firmware:  {result.firmware}")
    failed = [c["clock"] for c in result.report["clocks"] if not c["met"]]
    if failed:
        print(f"warning: timing not met for {', '.join(failed)}: the bitstream may not work reliably")
        if args.strict_timing:
            raise CLIError(f"timing not met for {', '.join(failed)} (--strict-timing)")
    return 0


def add_parser(sub):
    p = sub.add_parser("build", help="build gateware + firmware + bitstream (or the simulation binary)",
                       epilog="example:\n  ethdaq build --board colorlight_i5 --output-dir build/ci",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--board", required=True, help="board name (see 'ethdaq boards')")
    p.add_argument("--toolchain", help="toolchain (default: the board's first; see 'ethdaq boards')")
    p.add_argument("--output-dir", help="build directory (default build/BOARD); not under /tmp for ECP5")
    add_output_options(p)
    p.add_argument("--strict-timing", action="store_true", help="exit with an error when a clock misses its frequency")
    p.add_argument("--no-compile", action="store_true",
                   help="hardware boards: write the gateware, the firmware and the toolchain's project and scripts, "
                        "run no synthesis or place and route; the gateware directory builds anywhere it is moved")
    p.add_argument("--seed", type=int, default=1, help="nextpnr's first placement seed, ECP5 boards (default 1); "
                   "timing varies by several MHz between seeds")
    p.add_argument("--tries", type=int, help="ECP5 boards: place and route with seeds SEED, SEED+1, ... until every "
                   f"clock meets its constraint, at most TRIES times (default {pnr.DEFAULT_TRIES}; 1: one placement)")
    p.add_argument("--sys-clk-freq", type=freq_arg, help="system clock in Hz (default: the board's, see docs/boards)")
    p.add_argument("--build-id", type=build_id_arg, help="the build's name in the SoC's identifier and the firmware "
                   "(default: the git revision). The identifier is logic: on a nearly full FPGA another id can "
                   "place and route differently, so CI's build uses a fixed one")
    p.add_argument("--pin-probe", action="store_true",
                   help="simulated board only: print the cycle of every control frame at the GMII pins on the "
                        "console (bench/ctllatency.py)")
    add_network_options(p)
    p.set_defaults(func=cmd_build)
