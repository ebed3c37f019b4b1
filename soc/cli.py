#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""`ethdaq` command line: boards, build, sim, load, ctl, recv, merge, plot."""

import argparse
import ipaddress
import json
import re
import os
import signal
import subprocess
import sys
from pathlib import Path

from ethdaq.host import metrics
from ethdaq.host.protocol import EMULATOR_RATE_DEFAULT
from ethdaq.soc import ctlargs, pnr, progress

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


class CLIError(Exception):
    pass


class _Version(argparse.Action):
    """--version: the package's version and the sources' git revision (asked only when wanted)."""
    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the package version and the git revision of its sources, and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        from ethdaq import __version__
        from ethdaq.soc.gitrev import git_hash
        print(f"ethdaq {__version__} (git {git_hash()})")
        parser.exit()


def _say(args, text, **fields):
    """An action's result: `text` for people, or with --json the fields as one JSON object."""
    print(json.dumps(fields) if args.json else text)


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one line: 'Error: ...' plus a hint, exit code 2.

    `intermixed`: the options may come before, between or after the positional words (`ethdaq ctl
    config --ip B set payload=1472` as `ethdaq ctl config set payload=1472 --ip B`): argparse's
    intermixed parsing. Plain parsing takes the positional words in one run, so words after an
    option were left over and refused. A subparser is run through parse_known_args, which the
    intermixed parse calls in turn (on Python before 3.13), hence the guard.

    `owned_options`: {dest: word} for options that only one word of the positional `action` takes
    (`ethdaq ctl start --payload N`); given with another word, they are a usage error naming the
    word they are for. Intermixed parsers only."""
    intermixed    = False
    owned_options = None
    _intermixing  = False

    def error(self, message):
        sys.stderr.write(f"Error: {message} (see '{self.prog} --help')\n")
        sys.exit(2)

    def parse_known_args(self, args=None, namespace=None):
        if not self.intermixed or self._intermixing:
            return super().parse_known_args(args, namespace)
        self._intermixing = True
        try:
            namespace, rest = self.parse_known_intermixed_args(args, namespace)
            if self.owned_options:
                for a in self._given_options(args):
                    owner = self.owned_options.get(a.dest)
                    if owner is not None and owner != namespace.action:
                        self.error(f"{a.option_strings[0]} is for {self.prog} {owner}, not {namespace.action}")
            return namespace, rest
        finally:
            self._intermixing = False

    def _given_options(self, args):
        """The options `args` gives, whatever their values: args parsed again with every option's
        default suppressed, so only those given are in the namespace."""
        options = [a for a in self._actions if a.option_strings and a.default is not argparse.SUPPRESS]
        saved = [a.default for a in options]
        for a in options:
            a.default = argparse.SUPPRESS
        try:
            given = vars(self.parse_known_intermixed_args(args)[0])
        finally:
            for a, default in zip(options, saved):
                a.default = default
        return [a for a in options if a.dest in given]


def _ip(text):
    try:
        return str(ipaddress.IPv4Address(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"IP address must be dotted IPv4 like 192.168.1.50, not {text!r}")


def _netmask(text):
    from ethdaq.soc.daqsoc import parse_netmask
    try:
        return parse_netmask(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e))


def _gateway(text):
    from ethdaq.soc.daqsoc import parse_gateway
    try:
        return parse_gateway(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e))


def _mac(text):
    from ethdaq.soc.daqsoc import parse_mac
    try:
        parse_mac(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e))
    return text


def _dst_mac(text):
    from ethdaq.host.protocol import parse_mac
    try:
        mac = parse_mac(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e))
    if mac == bytes(6):
        raise argparse.ArgumentTypeError("destination MAC 00:00:00:00:00:00 means 'resolve by ARP': leave --dst-mac out")
    return mac


def _port(text):
    try:
        value = int(text, 0)
    except ValueError:
        value = -1
    if not 0 < value < 65536:
        raise argparse.ArgumentTypeError(f"port must be an integer in 1..65535, not {text!r}")
    return value


def _read_key(path):
    """A key file (hex), or a one-line error."""
    from ethdaq.host.protocol import parse_key
    try:
        return parse_key(Path(path).read_text())
    except OSError as e:
        raise CLIError(f"cannot read key file {path}: {e.strerror}") from None
    except ValueError as e:
        raise CLIError(f"key file {path}: {e}") from None


def _allow(text):
    """--ctl-allow, checked here for a one-line error; DAQSoC takes the text as it is."""
    from ethdaq.soc.daqsoc import parse_allow
    try:
        parse_allow(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def _sample_width(text):
    if text not in ("8", "16", "32", "64"):
        raise argparse.ArgumentTypeError(f"sample width must be 8, 16, 32 or 64 bits, not {text!r}")
    return int(text)


def _add_network_options(p):
    from ethdaq.host.protocol import MAX_STREAMS
    from ethdaq.soc.daqsoc import DEFAULT_CTL_PORT, DEFAULT_IP, DEFAULT_MAC
    p.add_argument("--ip",  type=_ip,  default=DEFAULT_IP,  help=f"board IPv4 address (default {DEFAULT_IP})")
    p.add_argument("--netmask", type=_netmask, metavar="MASK",
                   help="the board's subnet, as a prefix length (24) or a mask (255.255.255.0): the board answers "
                        "discovery on its directed broadcast, e.g. 192.168.1.255 (default: the address's class, "
                        "as ifconfig's: /8 below 128.0.0.0, /16 below 192.0.0.0, else /24)")
    p.add_argument("--gateway", type=_gateway, default=0, metavar="IP",
                   help="default gateway, a host of the board's subnet: streams and answers to addresses outside "
                        "the subnet go to its MAC (default none: every destination is asked for by ARP directly)")
    p.add_argument("--mac", type=_mac, default=DEFAULT_MAC, help=f"board MAC address (default {DEFAULT_MAC})")
    p.add_argument("--ctl-port", type=_port, default=DEFAULT_CTL_PORT,
                   help=f"firmware control UDP port (default {DEFAULT_CTL_PORT})")
    p.add_argument("--ctl-key-file", metavar="FILE",
                   help="shared key (hex, 16-64 bytes) the board requires on requests that change it "
                        "(HMAC-SHA256); it is built into the firmware, keep the build directory private")
    p.add_argument("--ctl-allow", type=_allow, default="", metavar="NET[,NET...]",
                   help="addresses that may control the board, e.g. 192.168.1.0/24,10.0.0.7 (default: any; "
                        "the first to claim it holds it, docs/protocol.md)")
    p.add_argument("--with-etherbone", action="store_true",
                   help="DEBUG ONLY: raw bus access over UDP (LiteX's litex_server --udp) for anyone on the network, "
                        "past the controller, allow-list and key; the build, the firmware and identify say so")
    p.add_argument("--etherbone-port", type=_port, default=1234, help="UDP port of --with-etherbone (default 1234)")
    g = p.add_argument_group("real-time services (docs/realtime.md)")
    g.add_argument("--with-classifier", action="store_true",
                   help="receive rules and the frame gate in front of LiteEth (only whole, good frames reach the "
                        "stack); about 800 more LUT4 on ECP5, so off by default")
    g.add_argument("--fasttrack-port", type=_port, action="append", default=[], metavar="PORT",
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
                   type=_int_in(1, MAX_STREAMS, "channels", why="the control protocol's channel mask is 8 bits"),
                   help="stream channels, each with its own detector emulator and buffer, 1 to 8 (default 4; "
                        "with --frontend, the channels the front-end drives)")
    g.add_argument("--sample-width", type=_sample_width, metavar="BITS", default=16,
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
    g.add_argument("--ptp-domain", type=_ptp_domain, default=0, help="PTP domainNumber (default 0)")
    g.add_argument("--ptp-log-sync", type=_log_interval, metavar="N",
                   help="Sync interval 2^N s as master, -10..6 (default 0: 1 s, as ptp4l; simulated board -7)")
    g.add_argument("--ptp-log-announce", type=_log_interval, metavar="N",
                   help="Announce interval 2^N s as master, -10..6 (default 1: 2 s, as ptp4l; simulated board -7)")
    g.add_argument("--ptp-log-delay-req", type=_log_interval, metavar="N",
                   help="minimum Delay_Req interval 2^N s, -10..6 (default 0: 1 s, as ptp4l; simulated board -7)")
    g.add_argument("--ptp-status-full", action="store_true",
                   help="the console's periodic PTP line (state, offset, path delay) is followed by the full "
                        "status line with every counter (default: the full line only at a state change)")


def _add_output_options(p):
    """What a build shows while it runs (`ethdaq build`, `ethdaq sim`)."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("--verbose", action="store_true",
                   help="show the build's output instead of writing it to OUTPUT_DIR/build.log")
    g.add_argument("--quiet", action="store_true",
                   help="show no progress while the build runs (by default: the stage, its time and the tools' "
                        "progress, on a terminal in one line updated in place, otherwise a line at each stage and "
                        f"every {progress.PLAIN_INTERVAL_S} s; README.md)")


def _int_in(lo, hi, what, why=None):
    """argparse type: an integer in lo..hi, else a one-line error naming `what` (and `why`)."""
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not lo <= value <= hi:
            reason = f" ({why})" if why else ""
            raise argparse.ArgumentTypeError(f"{what} must be an integer from {lo} to {hi}{reason}, not {text!r}")
        return value
    return parse


_log_interval = _int_in(-10, 6, "log2 interval")
_ptp_domain   = _int_in(0, 255, "PTP domain")


def _board(name):
    from ethdaq.boards import get_board
    return get_board(name)

# Subcommands --------------------------------------------------------------------------------------

def cmd_boards(args):
    from ethdaq.boards import BOARDS
    rows = [(b.name, b.fpga, b.phy, b.link, ", ".join(b.toolchains)) for b in BOARDS.values()]
    head = ("board", "FPGA", "PHY", "link", "toolchains")
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    for r in [head] + rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return 0


def _soc_kwargs(args):
    from ethdaq.soc.daqsoc import check_ports
    check_ports(args.ctl_port)
    kwargs = dict(ip_address=args.ip, netmask=args.netmask, gateway=args.gateway, mac_address=args.mac, ctl_port=args.ctl_port,
                  ctl_allow=args.ctl_allow,
                  ctl_key=_read_key(args.ctl_key_file) if args.ctl_key_file else None,
                  ptp_role=args.ptp_role, ptp_transport=args.ptp_transport, ptp_domain=args.ptp_domain,
                  ptp_log_sync=args.ptp_log_sync, ptp_log_announce=args.ptp_log_announce,
                  ptp_log_delay_req=args.ptp_log_delay_req, ptp_status_full=args.ptp_status_full)
    if getattr(args, "pin_probe", False):
        kwargs["with_pin_probe"] = True
    if args.with_classifier or args.fasttrack_port:
        from ethdaq.soc.daqsoc import DEFAULT_DATA_PORT, check_fasttrack_ports
        try:
            check_fasttrack_ports(tuple(args.fasttrack_port), args.ctl_port, DEFAULT_DATA_PORT, 8)
        except ValueError as e:
            raise CLIError(str(e))
        kwargs["with_classifier"] = True
        kwargs["fasttrack_ports"] = tuple(args.fasttrack_port)
    if getattr(args, "with_launcher", False):
        kwargs["with_launcher"] = True
    if getattr(args, "with_probes", False):
        kwargs["with_probes"] = True
    if getattr(args, "frontend", None):
        from ethdaq.gateware.frontend import load
        if args.channels is not None:
            raise CLIError(f"--channels: a front-end's channels are those it drives ({args.frontend} decides)")
        kwargs["frontend"] = load(args.frontend)
    if args.channels is not None:
        kwargs["nchannels"] = args.channels
    kwargs["sample_width"] = args.sample_width
    if args.with_etherbone:
        from ethdaq.soc.daqsoc import ETHERBONE_WARNING, check_etherbone_port
        try:
            check_etherbone_port(args.etherbone_port, args.ctl_port)
        except ValueError as e:
            raise CLIError(str(e))
        kwargs.update(with_etherbone=True, etherbone_port=args.etherbone_port)
        print(ETHERBONE_WARNING.format(port=args.etherbone_port), file=sys.stderr, flush=True)
    if getattr(args, "sys_clk_freq", None):
        kwargs["sys_clk_freq"] = args.sys_clk_freq
    if getattr(args, "build_id", None):
        kwargs["build_id"] = args.build_id
    return kwargs


def _build_id(text):
    if not re.fullmatch(r"[0-9A-Za-z._-]{1,32}", text):
        raise argparse.ArgumentTypeError(f"build id must be 1 to 32 letters, digits, '.', '_' or '-', not {text!r}")
    return text


def _freq(text):
    try:
        value = float(text)
    except ValueError:
        value = 0
    if not 1e6 <= value <= 500e6:
        raise argparse.ArgumentTypeError(f"frequency must be in Hz between 1e6 and 500e6, like 60e6, not {text!r}")
    return value


def cmd_build(args):
    from ethdaq.soc import build
    board = _board(args.board)
    toolchain = args.toolchain or board.toolchains[0]
    if toolchain not in board.toolchains:
        raise CLIError(f"toolchain for board {board.name} must be one of {', '.join(board.toolchains)}, not {toolchain!r}")
    output_dir = Path(args.output_dir or os.path.join("build", board.name))
    build.check_placement_options(board, toolchain, args.seed, args.tries)
    if board.is_sim and args.sys_clk_freq:
        raise CLIError("the simulated board's sys clock is fixed at 125 MHz (it is the GMII clock)")
    soc_kwargs = _soc_kwargs(args)
    if args.pin_probe and not board.is_sim:
        raise CLIError(f"--pin-probe reports from the simulated board's pins; {board.name} is real hardware")
    if args.no_compile and board.is_sim:
        raise CLIError("--no-compile is for hardware boards; the simulated board's build is its Verilator binary")
    build.preflight(board, output_dir)
    log = output_dir / "build.log"
    print(f"building {board.name} in {output_dir} (log: {log}) ...", flush=True)
    if board.is_sim:
        with build.output_to(log, args.verbose, show_progress=not args.quiet):
            result = build.build_sim(board, output_dir, **soc_kwargs)
        print(f"simulation binary: {result.artifact}")
        print(f"firmware:          {result.firmware}")
        print("run it with: sudo ethdaq sim")
        return 0
    with build.output_to(log, args.verbose, show_progress=not args.quiet):
        result = build.build_hardware(board, output_dir, toolchain=toolchain, seed=args.seed, tries=args.tries,
                                      run=not args.no_compile, **soc_kwargs)
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
    from ethdaq.host.protocol import MIN_PAYLOAD
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


def cmd_sim(args):
    from ethdaq.soc import build, sim
    board = _board("sim")
    sim.check_addresses(args.ip, args.host_ip)
    if args.stream:
        _check_demo_stream(board, args)
    sim.check_can_run(args.netns)  # Fail before the (long) build.
    output_dir = Path(args.output_dir or os.path.join("build", "sim"))
    soc_kwargs = _soc_kwargs(args)
    build.preflight(board, output_dir)
    log = output_dir / "build.log"
    print(f"building the simulated board in {output_dir} (log: {log}) ...", flush=True)
    with build.output_to(log, args.verbose, show_progress=not args.quiet):
        result = build.build_sim(board, output_dir, **soc_kwargs)
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


def cmd_load(args):
    from ethdaq.soc import tools
    board = _board(args.board)
    if board.is_sim:
        raise CLIError("board 'sim' is simulated and cannot be loaded; run 'sudo ethdaq sim'")
    bitstream = Path(args.bitstream or os.path.join(args.output_dir or os.path.join("build", board.name),
                                                    "gateware", f"{board.name}.bit"))
    if not bitstream.exists():
        raise CLIError(f"bitstream {str(bitstream)!r} not found; build it first with 'ethdaq build --board {board.name}'")
    tools.require("openFPGALoader")
    how = ["--cable", args.cable] if args.cable else board.loader
    cmd = ["openFPGALoader", *how, str(bitstream)]
    print("$ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd)
    if r.returncode != 0:
        raise CLIError(f"openFPGALoader failed with exit code {r.returncode} (board connected? {' '.join(how)}?)")
    return 0


def _identity_fields(ident):
    from ethdaq.host import protocol
    return {"board": ident.board, "build_id": ident.build_id, "ident": ident.ident,
              "mac": ident.mac_str, "ip": ident.ip_str, "ctl_port": ident.ctl_port,
              "sys_clk_hz": ident.sys_clk_hz, "eth_dw": ident.eth_dw, "nchannels": ident.nchannels,
              "sample_bits": ident.sample_bits, "max_payload": ident.max_payload,
              "capabilities": [name for bit, name in protocol.CAP_NAMES.items() if ident.capabilities & bit],
              "max_rates": list(ident.max_rates)}


def _print_identity(ident, as_json):
    from ethdaq.host.protocol import CAP_FRONTEND
    fields = _identity_fields(ident)
    if as_json:
        print(json.dumps(fields))
        return
    for key, label in [("board", "board"), ("build_id", "build"), ("ident", "ident"), ("mac", "mac"),
                       ("ip", "ip"), ("ctl_port", "control"), ("sys_clk_hz", "sys clock"),
                       ("nchannels", "channels"), ("sample_bits", "sample bits"), ("max_payload", "max payload"),
                       ("capabilities", "capabilities")]:
        value = fields[key]
        value = ", ".join(value) or "none" if key == "capabilities" else value
        value = f"udp/{value}" if key == "ctl_port" else f"{value} Hz" if key == "sys_clk_hz" else value
        print(f"{label:<14}{value}")
    rates = ctlargs.declared_rates_text(ident)
    if rates or ident.capabilities & CAP_FRONTEND:
        print(f"{'max rates':<14}{rates or 'undeclared by the front-end (ctl start cannot check it against the link)'}")


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
        print(json.dumps([dict(_identity_fields(ident), answered_from=ip) for ip, ident in found]))
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


def cmd_exporter(args):
    from ethdaq.host import boardmetrics
    from ethdaq.host.metrics import MetricsError
    key = _read_key(args.key_file) if args.key_file else None
    try:
        return boardmetrics.run(args.board, args.metrics, ctl_port=args.port, interval=args.interval,
                                timeout=args.timeout, key=key, duration=args.duration)
    except MetricsError as e:
        raise CLIError(str(e)) from None


def cmd_ctl(args):
    from ethdaq.host import protocol
    from ethdaq.host.ctl import ControlClient, ControlRefused, ControlTimeout
    from ethdaq.host.protocol import format_mac
    if args.settings and args.action not in ("config", "launch", "probe", "rules", "regs"):
        raise CLIError(f"ethdaq ctl {args.action} takes no arguments but options, not {' '.join(args.settings)!r}")
    key = _read_key(args.key_file) if args.key_file else None
    with ControlClient(args.ip, args.port, timeout=args.timeout, key=key) as client:
        try:
            if args.action == "identify":
                _print_identity(client.identify(), args.json)
            elif args.action == "start":
                return _ctl_start(client, args)
            elif args.action == "stop":
                _ctl_stop(client, args)
            elif args.action == "emulator":
                client.emulator(args.mode, protocol.emulator_rate_fixed(args.rate), args.seed)
                _say(args, f"emulator: {args.mode}, {args.rate:g} samples/cycle per channel",
                     mode=args.mode, rate=args.rate, seed=args.seed)
                if args.mode != "off":
                    _warn_budget(client, rate=args.rate)
            elif args.action == "ptp":
                p = client.ptp_status()
                d = dict(p.__dict__, state=p.state_name, servo_state=p.servo_name,
                         role=protocol.PTP_ROLES.get(p.role, p.role), transport="l2" if p.transport else "udp4",
                         freq_ppb=p.freq_scaled_ppb / 65536)
                del d["freq_scaled_ppb"]
                for k in ("clock_identity", "parent_identity", "gm_identity"):
                    d[k] = d[k].hex()
                if args.json:
                    print(json.dumps(d))
                else:
                    for k, v in d.items():
                        print(f"{k:<20}{v:.3f}" if isinstance(v, float) else f"{k:<20}{v}")
            elif args.action == "claim":
                granted, holder, left = client.claim(args.lease)
                if not granted:
                    raise CLIError(f"the board is held by {ipaddress.IPv4Address(holder)} for another "
                                   f"{left / 1000:.1f} s (it releases with `ethdaq ctl release`, or the lease runs out)")
                _say(args, f"this host ({ipaddress.IPv4Address(holder)}) controls the board for {left / 1000:.0f} s; "
                           f"every start, stop or emulator request renews it",
                     controller=str(ipaddress.IPv4Address(holder)), lease_ms=left)
            elif args.action == "release":
                client.release()
                _say(args, "released: any allowed host may now control the board", released=True)
            elif args.action == "config":
                verb = args.settings[0] if args.settings else "get"
                if verb == "get" and len(args.settings) <= 1:
                    cfg = client.config()
                elif verb == "set" and len(args.settings) > 1:
                    try:
                        fields = dict(protocol.parse_config_assignment(t) for t in args.settings[1:])
                    except ValueError as e:
                        raise CLIError(str(e))
                    _check_on_board(client, fields)
                    cfg = client.config_set(**fields)
                    if {"emulator_mode", "emulator_rate", "payload", "enable"} & set(fields):
                        _warn_budget(client, cfg)
                    if "ip" in fields or "mac" in fields:
                        # On stderr: --json output stays one JSON document.
                        print(f"the board now answers at {ipaddress.IPv4Address(cfg.ip)} "
                              f"({protocol.format_mac(cfg.mac)}) and has announced it by ARP; "
                              f"a reboot returns it to its build's address", file=sys.stderr)
                else:
                    raise CLIError("usage: ethdaq ctl config [get] | config set NAME=VALUE [NAME=VALUE ...] "
                                   f"(NAME one of {', '.join(n for n in protocol.CONFIG_FIELDS if n not in protocol.CONFIG_FIXED)})")
                d = protocol.format_config(cfg)
                if args.json:
                    print(json.dumps(d))
                else:
                    for k, v in d.items():
                        print(f"{k:<20}{v}")
            elif args.action == "reboot":
                rebooted, st = client.reboot(wait=None if args.no_wait else args.wait)
                fields = dict(rebooted=bool(rebooted), boots=st.boots)
                if args.no_wait:
                    _say(args, "rebooting" if rebooted else f"the board has rebooted already (boot {st.boots})",
                         **fields)
                else:
                    _say(args, f"{'rebooted' if rebooted else 'the board had rebooted already'}: boot {st.boots} "
                               f"since power-on, reset cause {st.reset_cause_name}, up {st.uptime_ms} ms",
                         **fields, reset_cause=st.reset_cause_name, uptime_ms=st.uptime_ms)
            elif args.action == "launch":
                _ctl_launch(client, args)
            elif args.action == "probe":
                _ctl_probe(client, args)
            elif args.action == "rules":
                _ctl_rules(client, args)
            elif args.action == "regs":
                _ctl_regs(client, args)
            elif args.action == "rx":
                stats = client.rx_stats()
                if args.nonzero:
                    stats = {name: v for name, v in stats.items() if v}
                if args.json:
                    print(json.dumps(stats))
                else:
                    print("\n".join(format_rx_stats(stats)))
            elif args.action == "status":
                status = client.status()
                st = status.__dict__
                st["dst_mac"] = format_mac(st["dst_mac"])
                st["link"] = status.link_text
                st["phy_id"] = f"0x{st['phy_id']:08x}"
                st["controller_ip"] = str(ipaddress.IPv4Address(st["controller_ip"])) if st["controller_ip"] else None
                streams = client.streams_if_any()
                st["streams"] = [dict(stream=c.stream, enabled=c.enabled, datagrams=c.datagrams, bytes=c.bytes,
                                      dropped=c.dropped) for c in streams.streams] if streams else []
                if args.json:
                    print(json.dumps(st))
                else:
                    for k, v in st.items():
                        if k != "streams":
                            print(f"{k:<16}{v}")
                    if streams:
                        print(f"streams of run {streams.run}:")
                        print(f"  {'stream':>6} {'enabled':>7} {'datagrams':>12} {'bytes':>16} {'dropped':>12}")
                        for c in streams.streams:
                            print(f"  {c.stream:>6} {'yes' if c.enabled else 'no':>7} {c.datagrams:>12} "
                                  f"{c.bytes:>16} {c.dropped:>12}")
        except ControlRefused as e:
            if e.code == protocol.ERR_BAD_VALUE and e.refusal is None and args.action in ("start", "config"):
                raise CLIError(f"{e}: {_stream_ranges_text(client)}") from None
            raise CLIError(str(e)) from None
        except ControlTimeout as e:
            raise CLIError(str(e)) from None
    return 0


def _stream_ranges_text(client):
    """What a board takes of the stream settings (IDENTIFY), for its refusal's message."""
    from ethdaq.host.ctl import ControlRefused, ControlTimeout
    try:
        return f"this board takes {ctlargs.stream_ranges(client.identify())}"
    except (ControlTimeout, ControlRefused):
        return "the ranges are in docs/protocol.md"


def _warn_budget(client, cfg=None, **settings):
    """On stderr, the link budget's warning for the board's settings (`cfg`, else CONFIG_GET's)
    with `settings` (rate, payload, enable) in their place, if they do not fit its link: the
    emulators' rate, or on a board whose front-end declares its rates, those."""
    from ethdaq.host.protocol import EMULATOR_MODES
    cfg = cfg or client.config()
    ident = client.identify()
    if "rate" not in settings and any(ident.max_rates):
        text = ctlargs.frontend_budget_warning(ident, cfg, client.status(), **settings)
        if text:
            print(f"warning: {text}", file=sys.stderr)
        return
    if "rate" not in settings and cfg.emulator_mode == EMULATOR_MODES["off"]:
        return
    text = ctlargs.budget_warning(ident, cfg, client.status(), **settings)
    if text:
        print(f"warning: {text}", file=sys.stderr)


def _check_on_board(client, fields, options=False):
    """The settings whose range depends on the board (payload, channel masks), checked against its
    IDENTIFY before they are sent: a one-line error naming the field (as an option with
    `options`) and the board's range."""
    from ethdaq.host import protocol
    if {"ip", "netmask", "gateway"} & set(fields):
        _check_route(client.config(), fields)
    names = [name for name in ("payload", "enable", "backpressure") if fields.get(name) is not None]
    if not names:
        return
    ident = client.identify()
    for name in names:
        try:
            protocol.check_field(name, fields[name], ident)
        except ValueError as e:
            raise CLIError(f"--{name}: {e}" if options else str(e)) from None


def _check_route(cfg, fields):
    """A change of ip, netmask or gateway must leave the gateway a host of the board's subnet (the
    board refuses it too): a one-line error naming the subnet and the gateway."""
    from ethdaq.host import protocol
    ip, netmask, gateway = (fields.get(n, getattr(cfg, n)) for n in ("ip", "netmask", "gateway"))
    if not protocol.gateway_valid(ip, netmask, gateway):
        net = ipaddress.IPv4Network((ip, bin(netmask).count("1")), strict=False)
        raise CLIError(f"gateway must be a host of the board's subnet {net} other than the board "
                       f"({ipaddress.IPv4Address(ip)}), or 0.0.0.0 for none, not {ipaddress.IPv4Address(gateway)}")


def _start_settings(client, args):
    """STREAM_START's fields: the options given, the board's settings (CONFIG_GET) for the others;
    payload and channel masks checked against the board (IDENTIFY) before anything is started."""
    from ethdaq.host import protocol
    given = {"dst_ip": None if args.dst_ip is None else int(ipaddress.IPv4Address(args.dst_ip)),
             "dst_port": args.dst_port, "payload": args.payload, "enable": args.enable,
             "backpressure": args.backpressure, "gap": args.gap, "dst_mac": args.dst_mac,
             "flush": args.flush}
    cfg = client.config()
    _check_on_board(client, given, options=True)
    given = {k: getattr(cfg, k) if v is None else v for k, v in given.items()}
    if given["dst_mac"] == bytes(6):
        given["dst_mac"] = None
    return given, cfg


def _ctl_stop(client, args):
    """STREAM_STOP; the STATUS before it tells whether a run was going (the stop's answer names
    the last run either way)."""
    running = client.status().running
    run = client.stream_stop()
    text = f"run {run} stopped" if running else f"no run was running (run {run}, the last, had stopped already)"
    _say(args, text, run=run, was_running=bool(running))


def _ctl_start(client, args):
    from ethdaq.host import protocol
    from ethdaq.host.protocol import format_mac
    given, cfg = _start_settings(client, args)
    run, used = client.stream_start(**given)
    started = f"run {run} started: datagrams of {given['payload']} bytes to {ipaddress.IPv4Address(used)}:{given['dst_port']}"
    if not args.json:
        print(started)
    _warn_budget(client, cfg, payload=given["payload"], enable=given["enable"])
    st = client.wait_destination()
    if args.json:
        mac = format_mac(st.dst_mac) if st.dst_flags & protocol.DST_VALID else None
        print(json.dumps(dict(run=run, dst_ip=str(ipaddress.IPv4Address(used)), dst_port=given["dst_port"],
                              payload=given["payload"], enable=given["enable"], dst_mac=mac)))
    elif st.dst_flags & protocol.DST_VALID:
        print(f"destination MAC {format_mac(st.dst_mac)}")
    elif st.dst_flags & protocol.DST_UNREACHABLE:
        # The run is going (and counting dropped samples): the user decides.
        print(f"warning: {ipaddress.IPv4Address(used)} does not answer ARP: datagrams wait "
              f"and samples are dropped (counted) until it does; give --dst-mac to skip ARP",
              file=sys.stderr)
        return 1
    return 0


def _duration_ns(text):
    """'2ms', '500us', '1.5s', '800ns' -> ns."""
    from ethdaq.host.protocol import parse_duration_ns
    try:
        return parse_duration_ns(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _flush_ns(text):
    """--flush: a duration from 1us to 1s, or 0/off -> ns."""
    from ethdaq.host.protocol import parse_flush
    try:
        return parse_flush(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _ctl_launch(client, args):
    from ethdaq.host import protocol
    verb = args.settings[0] if args.settings else "status"
    if verb not in ("arm", "stop", "status") or len(args.settings) > 1:
        raise CLIError("usage: ethdaq ctl launch [arm|stop|status] --board ADDR (arm: --to HOST:PORT --to-mac MAC "
                       "[--data TEXT] (--in TIME | --at SEC.NS) [--period TIME] [--count N] [--guard CYCLES])")
    if verb == "arm":
        if not args.to or not args.to_mac:
            raise CLIError("ethdaq ctl launch arm needs --to HOST:PORT and --to-mac MAC (the board does not ARP "
                           "for launched frames: they must leave on time)")
        if (args.launch_in is None) == (args.at is None):
            raise CLIError("give the launch time as --in TIME (from when the board reads the request) or --at SEC.NS "
                           "(the board's PTP clock)")
        host, _, port = args.to.rpartition(":")
        try:
            dst_ip, dport = int(ipaddress.IPv4Address(host)), int(port)
        except ValueError:
            raise CLIError(f"--to must be HOST:PORT, e.g. 192.168.1.10:9100, not {args.to!r}")
        ident = client.identify()
        if not ident.capabilities & protocol.CAP_LAUNCHER:
            raise CLIError(f"this board's build has no launcher (build it with --with-launcher)")
        frame = protocol.udp_frame(protocol.parse_mac(args.to_mac), ident.mac, ident.ip, dst_ip, args.from_port,
                                   dport, args.data.encode())
        if len(frame) > protocol.LAUNCH_FRAME_MAX:
            raise CLIError(f"--data is too long: a launched frame holds at most "
                           f"{protocol.LAUNCH_FRAME_MAX - 42} bytes of UDP payload")
        at = None
        if args.at is not None:
            sec, _, frac = args.at.partition(".")
            at = (int(sec), int((frac + "000000000")[:9]))
        ls = client.launch(frame, at=at, after_ns=args.launch_in, period_ns=args.period, count=args.count,
                           guard=args.guard)
    elif verb == "stop":
        ls = client.launch_stop()
    else:
        ls = client.launch_status()
    d = dict(ls.__dict__)
    d["first"] = f"{ls.first_sec}.{ls.first_ns:09d}"
    del d["first_sec"], d["first_ns"]
    if args.json:
        print(json.dumps(d))
    else:
        for k, v in d.items():
            print(f"{k:<14}{v}")


def probe_table(report):
    """The latency probes' report as the lines `ethdaq ctl probe` prints: per class count, min,
    mean, max in ns and cycles, then the histogram."""
    from ethdaq.host import protocol
    ns = report.cycle_ps / 1000
    lines = [f"latency per frame class, {ns:g} ns cycles (docs/realtime.md: where each starts and ends)",
             f"  {'class':<14} {'frames':>10} {'min':>14} {'mean':>16} {'3 sigma':>14} {'max':>14}"]
    for name, c in report.classes.items():
        if c.count:
            lines.append(f"  {name:<14} {c.count:>10} {c.min * ns:>9.0f} ns {c.mean * ns:>11.1f} ns "
                         f"{3 * c.std * ns:>9.1f} ns {c.max * ns:>9.0f} ns")
        else:
            lines.append(f"  {name:<14} {0:>10} {'-':>14} {'-':>16} {'-':>14} {'-':>14}")
    lines.append(f"unpaired: tx {report.tx_unpaired}, rx {report.rx_unpaired}; not recorded (overflows): "
                 f"tx {report.tx_overflows}, rx {report.rx_overflows}")
    lines.append("histogram (frames per latency range, cycles):")
    heads = []
    for k in range(protocol.PROBE_NBINS):
        lo, hi = protocol.ProbeClass.bin_range(k)
        heads.append(f"{lo}-{hi}" if hi is not None else f"{lo}+")
    for name, c in report.classes.items():
        cells = [f"{heads[k]}: {n}" for k, n in enumerate(c.bins) if n]
        lines.append(f"  {name:<14} " + (", ".join(cells) if cells else "-"))
    return lines


def _ctl_probe(client, args):
    from ethdaq.host import protocol
    verb = args.settings[0] if args.settings else "read"
    if verb not in ("read", "clear") or len(args.settings) > 1:
        raise CLIError("usage: ethdaq ctl probe [read|clear] --board ADDR")
    ident = client.identify()
    if not ident.capabilities & protocol.CAP_PROBES:
        raise CLIError("this board's build has no latency probes (build it with --with-probes)")
    if verb == "clear":
        client.probe_clear()
        _say(args, "latency probes cleared: statistics from now on", cleared=True)
        return
    report = client.probe()
    if args.json:
        d = dict(report.__dict__)
        d["classes"] = {n: dict(c.__dict__, mean=c.mean, std=c.std) for n, c in report.classes.items()}
        for c in d["classes"].values():
            del c["name"]
        print(json.dumps(d))
    else:
        print("\n".join(probe_table(report)))


RULES_USAGE = ("usage: ethdaq ctl rules [set INDEX [action=cpu|fasttrack|drop] [port=N] [proto=N] "
               "[ethertype=N] [src=IP] [enable=0|1]] --board ADDR")


def parse_rule(words, ctl_port):
    """`ethdaq ctl rules set` arguments: INDEX NAME=VALUE ... -> rule_set keyword arguments (the
    match bits from the names given); CLIError with the reason."""
    from ethdaq.host import protocol
    if not words:
        raise CLIError(RULES_USAGE)
    try:
        if not words[0].isdigit():
            raise ValueError(f"the rule's index must be a number, not {words[0]!r}")
        rule = dict(index=int(words[0]), enable=1, action=protocol.RULE_ACTIONS["cpu"], match=0)
        for w in words[1:]:
            name, eq, value = w.partition("=")
            if not eq:
                raise ValueError(f"{w!r} is not NAME=VALUE")
            if name == "action":
                if value not in protocol.RULE_ACTIONS:
                    raise ValueError(f"action must be one of {', '.join(protocol.RULE_ACTIONS)}, not {value!r}")
                rule["action"] = protocol.RULE_ACTIONS[value]
            elif name == "enable":
                rule["enable"] = int(value)
            elif name in ("port", "proto", "ethertype"):
                limit = 0xFF if name == "proto" else 0xFFFF
                rule[name] = int(value, 0)
                if not 0 <= rule[name] <= limit:
                    raise ValueError(f"{name} must be 0..{limit}, not {value}")
                rule["match"] |= {"port": protocol.RULE_MATCH_PORT, "proto": protocol.RULE_MATCH_PROTO,
                                  "ethertype": protocol.RULE_MATCH_TYPE}[name]
            elif name == "src":
                rule["src_ip"] = int(ipaddress.IPv4Address(value))
                rule["match"] |= protocol.RULE_MATCH_SRC
            else:
                raise ValueError(f"unknown rule field {name!r} (action, port, proto, ethertype, src, enable)")
        protocol.check_rule(rule["index"], rule["enable"], rule["action"], rule["match"], rule.get("port", 0),
                            ctl_port)
    except (ValueError, protocol.ProtocolError) as e:
        raise CLIError(f"{e} ({RULES_USAGE})")
    return rule


def _ctl_rules(client, args):
    from ethdaq.host import protocol
    verb = args.settings[0] if args.settings else "show"
    if verb not in ("show", "set") or (verb == "show" and len(args.settings) > 1):
        raise CLIError(RULES_USAGE)
    if verb == "set":
        rule = parse_rule(args.settings[1:], args.port)
    ident = client.identify()
    if not ident.capabilities & protocol.CAP_RULES:
        raise CLIError("this board's build has no receive classifier (build it with --with-classifier "
                       "or --fasttrack-port)")
    if verb == "set":
        r = client.rule_set(**rule)
        if not args.json:   # The JSON below holds the rule as set.
            print(f"rule {r.index}: {'enabled' if r.enable else 'disabled'}, {r.action_name} for {r.describe()}")
    rules = client.rules()
    if args.json:
        print(json.dumps(dict(unmatched=rules.unmatched, gate_error=rules.gate_error, gate_full=rules.gate_full,
                              gate_oversize=rules.gate_oversize,
                              rules=[dict(r.__dict__, action=r.action_name, matches=r.describe()) for r in rules.rules])))
        return
    print(f"  {'rule':>4} {'enabled':>7} {'action':>9} {'matched':>10} {'refused':>10}  matches")
    for r in rules.rules:
        print(f"  {r.index:>4} {'yes' if r.enable else 'no':>7} {r.action_name:>9} {r.matched:>10} {r.refused:>10}  "
              f"{r.describe()}")
    print(f"frames no rule matched: {rules.unmatched}; dropped whole at the frame gate: {rules.gate_error} "
          f"(bad FCS, or taken by a drop or fast-track rule), {rules.gate_full} (no room), "
          f"{rules.gate_oversize} (too long)")


def format_rx_stats(stats):
    """RX_STATS' counters ({name: value}, protocol.RxStats), one line each: name, value, what it counts."""
    from ethdaq.host import protocol
    if not stats:
        return ["  (no counter to show)"]
    return [f"  {name:<16} {value:>14}  "
            f"{protocol.RX_COUNTER_DESCRIPTIONS.get(name, 'a counter this host does not know (a newer board)')}"
            for name, value in stats.items()]


def frontend_registers(csr_json):
    """The front-end's registers from a build's csr.json: {name without 'frontend_': (byte offset
    from the front-end's base, 32-bit words, writable)}, in address order."""
    try:
        csr = json.loads(Path(csr_json).read_text())
    except FileNotFoundError:
        raise CLIError(f"{csr_json}: not found (the build directory's csr.json)") from None
    except (OSError, ValueError) as e:
        raise CLIError(f"{csr_json}: not a build's csr.json ({getattr(e, 'strerror', None) or e})") from None
    try:
        bases = csr["csr_bases"]
        if "frontend" not in bases:
            raise CLIError(f"{csr_json}: its build has no front-end registers (only {', '.join(bases) or 'none'}); "
                           "was the board built with --frontend?")
        base = bases["frontend"]
        regs = {name[len("frontend_"):]: (r["addr"] - base, r["size"], r["type"] == "rw")
                for name, r in csr["csr_registers"].items() if name.startswith("frontend_")}
    except (KeyError, TypeError, AttributeError):
        raise CLIError(f"{csr_json}: not a build's csr.json (no csr_bases and csr_registers as LiteX writes them)") from None
    return dict(sorted(regs.items(), key=lambda kv: kv[1][0]))


def _ctl_regs(client, args):
    from ethdaq.host import protocol
    if not args.csr:
        raise CLIError("ethdaq ctl regs needs the build's register map: --csr OUTPUT_DIR/csr.json")
    regs = frontend_registers(args.csr)
    writes, reads = [], []
    for word in args.settings:
        name, eq, value = word.partition("=")
        name = name.removeprefix("frontend_")
        if name not in regs:
            raise CLIError(f"no front-end register {name!r}; there are: {', '.join(regs)}")
        offset, size, writable = regs[name]
        if eq:
            if not writable:
                raise CLIError(f"front-end register {name!r} is read-only")
            try:
                v = int(value, 0)
            except ValueError:
                raise CLIError(f"{word!r}: the value must be a number") from None
            if not 0 <= v < 1 << 32*size:
                raise CLIError(f"{word!r}: {name} holds {32*size} bits")
            writes.append((name, offset, [(v >> 32*(size - 1 - i)) & 0xFFFFFFFF for i in range(size)]))
        reads.append(name)
    ident = client.identify()
    if not ident.capabilities & protocol.CAP_FRONTEND:
        raise CLIError("this board's build has no front-end (build it with --frontend)")
    for name, offset, words in writes:
        client.reg_write(offset, words)
    values = {}
    for name in reads or regs:
        offset, size, _ = regs[name]
        words = client.reg_read(offset, size)
        values[name] = sum(w << 32*(size - 1 - i) for i, w in enumerate(words))
    if args.json:
        print(json.dumps(values))
        return
    for name, v in values.items():
        print(f"  {name:<24} {v:>12}  0x{v:x}{'' if regs[name][2] else '  (read-only)'}")


def cmd_recv(args):
    from ethdaq.host import recv
    try:
        return recv.run(args)
    except recv.RecvError as e:
        raise CLIError(str(e))


def cmd_merge(args):
    from ethdaq.host import merge
    try:
        return merge.run(args)
    except merge.MergeError as e:
        sys.stderr.write(f"Error: {e}\n")
        return e.status


def cmd_plot(args):
    from ethdaq.host import plot
    return plot.run(args)

# Parser -------------------------------------------------------------------------------------------

CTL_ACTIONS = ["identify", "start", "stop", "status", "ptp", "emulator", "claim", "release", "reboot", "config",
               "launch", "probe", "rules", "regs", "rx"]
CTL_SETTINGS_ACTIONS = ("config", "launch", "probe", "rules", "regs")   # Those that take more words.


def make_parser():
    parser = _Parser(prog="ethdaq", description="ethdaq: FPGA data acquisition over Ethernet (LiteX/LiteEth).",
                     epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser("boards", help="list boards with FPGA, PHY and link speed")
    p.set_defaults(func=cmd_boards)

    p = sub.add_parser("build", help="build gateware + firmware + bitstream (or the simulation binary)",
                       epilog="example:\n  ethdaq build --board colorlight_i5 --output-dir build/ci",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--board", required=True, help="board name (see 'ethdaq boards')")
    p.add_argument("--toolchain", help="toolchain (default: the board's first; see 'ethdaq boards')")
    p.add_argument("--output-dir", help="build directory (default build/BOARD); not under /tmp for ECP5")
    _add_output_options(p)
    p.add_argument("--strict-timing", action="store_true", help="exit with an error when a clock misses its frequency")
    p.add_argument("--no-compile", action="store_true",
                   help="hardware boards: write the gateware, the firmware and the toolchain's project and scripts, "
                        "run no synthesis or place and route; the gateware directory builds anywhere it is moved")
    p.add_argument("--seed", type=int, default=1, help="nextpnr's first placement seed, ECP5 boards (default 1); "
                   "timing varies by several MHz between seeds")
    p.add_argument("--tries", type=int, help="ECP5 boards: place and route with seeds SEED, SEED+1, ... until every "
                   f"clock meets its constraint, at most TRIES times (default {pnr.DEFAULT_TRIES}; 1: one placement)")
    p.add_argument("--sys-clk-freq", type=_freq, help="system clock in Hz (default: the board's, see docs/boards)")
    p.add_argument("--build-id", type=_build_id, help="the build's name in the SoC's identifier and the firmware "
                   "(default: the git revision). The identifier is logic: on a nearly full FPGA another id can "
                   "place and route differently, so CI's build uses a fixed one")
    p.add_argument("--pin-probe", action="store_true",
                   help="simulated board only: print the cycle of every control frame at the GMII pins on the "
                        "console (bench/ctllatency.py)")
    _add_network_options(p)
    p.set_defaults(func=cmd_build)

    p = sub.add_parser("sim", help="build and run the simulated board in a private network namespace (root)",
                       epilog="example:\n  sudo ethdaq sim --ping 5 --identify",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_network_options(p)
    p.add_argument("--host-ip", type=_ip, default="192.168.1.100", help="address of the tap inside the namespace (default 192.168.1.100)")
    p.add_argument("--netns", default="ethdaq", help="network namespace to create (default ethdaq)")
    p.add_argument("--tap", default="ethdaq0", help="tap interface name inside the namespace (default ethdaq0)")
    p.add_argument("--output-dir", help="build directory (default build/sim)")
    _add_output_options(p)
    p.add_argument("--pin-probe", action="store_true",
                   help="print the cycle of every control frame at the GMII pins on the console (bench/ctllatency.py)")
    p.add_argument("--ping", type=ctlargs.positive("--ping", int, zero=True), default=0, metavar="N",
                   help="after boot, ping the board N times")
    p.add_argument("--identify", action="store_true", help="after boot, send an identify request")
    p.add_argument("--stream", type=ctlargs.positive("--stream", zero=True), default=0, metavar="S",
                   help="after boot, stream emulated detector data to a receiver in the namespace for S seconds")
    p.add_argument("--stream-rate", type=ctlargs.rate, default=EMULATOR_RATE_DEFAULT, metavar="R",
                   help=f"emulator samples per clock cycle per channel for --stream, 0..1 (default "
                        f"{EMULATOR_RATE_DEFAULT:g}; the link carries 1 byte a cycle, headers included: a warning "
                        f"gives the arithmetic when channels x sample bytes x R exceed it)")
    p.add_argument("--payload", type=ctlargs.setting("payload"), default=1472,
                   help="UDP payload bytes per datagram for --stream (default 1472)")
    p.add_argument("--duration", type=ctlargs.positive("--duration", zero=True), metavar="S",
                   help="stop after S seconds (default: after --ping/--identify, else on Ctrl-C)")
    p.add_argument("--boot-timeout", type=ctlargs.positive("--boot-timeout"), default=120, metavar="S",
                   help="seconds to wait for the firmware banner")
    p.set_defaults(func=cmd_sim)

    p = sub.add_parser("load", help="load a bitstream into the board with openFPGALoader")
    p.add_argument("--board", required=True, help="board name")
    p.add_argument("--bitstream", help="bitstream (default build/BOARD/gateware/BOARD.bit)")
    p.add_argument("--output-dir", help="build directory the bitstream is in")
    p.add_argument("--cable", help="openFPGALoader cable (default: the board's)")
    p.set_defaults(func=cmd_load)

    p = sub.add_parser("discover", help="find boards: IDENTIFY to a broadcast address, every answer listed",
                       epilog="examples:\n  ethdaq discover\n  ethdaq discover --broadcast 192.168.1.255 --json",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--broadcast", type=_ip, default="255.255.255.255", metavar="ADDR",
                   help="where IDENTIFY goes: 255.255.255.255 (the default) or a subnet's directed broadcast "
                        "such as 192.168.1.255, which leaves by the interface on that subnet (255.255.255.255 by the "
                        "default route's)")
    p.add_argument("--port", type=_port, default=7000, help="control port (default 7000)")
    p.add_argument("--timeout", type=ctlargs.positive("--timeout"), default=1.0, metavar="S",
                   help="seconds to collect answers (default 1)")
    p.add_argument("--json", action="store_true", help="print JSON: a list, one entry per board")
    p.set_defaults(func=cmd_discover)

    p = sub.add_parser("exporter", help="Prometheus metrics of boards: STATUS, streams, PTP, receive counters",
                       epilog="examples:\n  ethdaq exporter --board 192.168.1.50 --metrics 0.0.0.0:9109\n"
                              "  ethdaq exporter --board 192.168.1.50 --board 192.168.1.51 --metrics 9109 --interval 10\n"
                              "(docs/protocol.md, \"Prometheus metrics of boards\")",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--board", type=_ip, action="append", required=True, metavar="ADDR",
                   help="a board's IPv4 address (repeat it for more)")
    p.add_argument("--port", type=_port, default=7000, help="the boards' control port (default 7000)")
    p.add_argument("--metrics", type=metrics.address_arg, required=True, metavar="[ADDR:]PORT",
                   help="the HTTP port to serve on (ADDR default 127.0.0.1; 0.0.0.0 for every interface)")
    p.add_argument("--interval", type=ctlargs.positive("--interval"), default=5.0, metavar="S",
                   help="seconds between polls of each board (default 5)")
    p.add_argument("--timeout", type=ctlargs.positive("--timeout"), default=1.0, metavar="S",
                   help="seconds per try of each request (3 tries)")
    p.add_argument("--duration", type=ctlargs.positive("--duration"), metavar="S",
                   help="stop after S seconds (default: at Ctrl-C or SIGTERM)")
    p.add_argument("--key-file", metavar="FILE", help="the boards' shared key (hex): sign every request")
    p.set_defaults(func=cmd_exporter)

    p = sub.add_parser("ctl", help="talk to a board's control port",
                       epilog="examples:\n  ethdaq ctl identify --ip 192.168.1.50\n"
                              "  ethdaq ctl emulator --ip 192.168.1.50 --mode counter --rate 0.01\n"
                              "  ethdaq ctl start --ip 192.168.1.50 --dst-port 5000 --payload 1472\n"
                              "  ethdaq ctl stop --ip 192.168.1.50\n"
                              "  ethdaq ctl config --ip 192.168.1.50\n"
                              "  ethdaq ctl config set payload=1024 dst_port=6000 ptp_role=slave --ip 192.168.1.50\n"
                              "  ethdaq ctl launch arm --board 192.168.1.50 --to 192.168.1.10:9100 --to-mac 02:00:00:00:00:01 "
                              "--data trigger --in 10ms --period 1ms --count 100\n"
                              "  ethdaq ctl probe --board 192.168.1.50\n"
                              "  ethdaq ctl rules set 1 action=drop port=9100 --board 192.168.1.50\n"
                              "  ethdaq ctl regs threshold=1500 --csr build/sim/csr.json --board 192.168.1.50\n"
                              "  ethdaq ctl rx --nonzero --board 192.168.1.50",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", choices=CTL_ACTIONS,
                   help="request to send (start, stop, emulator, claim, release, reboot and config set only from "
                        "the controller: docs/protocol.md)")
    p.add_argument("settings", nargs="*", metavar="get|set NAME=VALUE",
                   help="for config: get (the default), or set NAME=VALUE ... (e.g. payload=1024 ptp_role=slave); "
                        "for launch: arm, stop or status (the default); for probe: read (the default) or clear; "
                        "for rules: show (the default) or set INDEX action=drop port=9100 ...; "
                        "for regs: the front-end's registers, all (the default), NAME or NAME=VALUE ...")
    p.add_argument("--ip", "--board", dest="ip", type=_ip, required=True, metavar="ADDR",
                   help="the board's IPv4 address (--board ADDR is the same, kept for scripts; elsewhere "
                        "--board names a kind of board)")
    p.add_argument("--port", type=_port, default=7000, help="control port (default 7000)")
    p.add_argument("--timeout", type=ctlargs.positive("--timeout"), default=2.0, help="seconds per try (3 tries)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--key-file", metavar="FILE", help="the board's shared key (hex): sign every request")
    g = p.add_argument_group("start")
    g.add_argument("--dst-ip", type=_ip, help="where datagrams go (default: this host, as the board sees it)")
    g.add_argument("--dst-port", type=_port, help="destination UDP port (default: the board's setting, 5000)")
    g.add_argument("--payload", type=ctlargs.setting("payload"), help="UDP payload bytes per datagram, header included "
                                              "(default: the board's setting, 1472)")
    g.add_argument("--enable", type=ctlargs.mask("enable"), help="channel mask (default: the board's setting, all)")
    g.add_argument("--dst-mac", type=_dst_mac, help="destination MAC, skipping ARP (default: resolved by ARP)")
    g.add_argument("--backpressure", type=ctlargs.mask("backpressure"), help="channels that stall instead of dropping (mask; "
                                                                   "default: the board's setting, 0)")
    g.add_argument("--gap", type=ctlargs.setting("gap"), help="idle clock cycles after each datagram (rate limit; default: the board's "
                                           "setting, 0)")
    g.add_argument("--flush", type=_flush_ns, metavar="TIME",
                   help="a channel's partial datagram leaves this long after its last sample, e.g. 100us "
                        "(1us to 1s, 0 or off: only when full or at stop; default: the board's setting, 1ms)")
    g = p.add_argument_group("emulator")
    g.add_argument("--mode", choices=["off", "counter", "ramp", "pulse"], default="counter")
    g.add_argument("--rate", type=ctlargs.rate, default=EMULATOR_RATE_DEFAULT,
                   help=f"samples per clock cycle per channel, 0..1 (default {EMULATOR_RATE_DEFAULT:g}; "
                        f"a warning says when the board's link cannot carry it)")
    g.add_argument("--seed", type=ctlargs.setting("emulator_seed"), default=1, help="pulse-train seed")
    g = p.add_argument_group("claim")
    g.add_argument("--lease", type=_int_in(0, 3600, "lease"), default=0, metavar="S",
                   help="seconds the board stays this host's without a request (0: the board's default, 60)")
    g = p.add_argument_group("launch arm (boards built --with-launcher: docs/realtime.md)")
    g.add_argument("--to", metavar="HOST:PORT", help="the launched UDP datagram's destination")
    g.add_argument("--to-mac", metavar="MAC", help="its destination MAC (the board does not ARP for launches)")
    g.add_argument("--from-port", type=_port, default=9100, help="its source UDP port (default 9100)")
    g.add_argument("--data", default="", help="its payload, as text (default: empty)")
    g.add_argument("--in", dest="launch_in", type=_duration_ns, metavar="TIME",
                   help="first launch this long after the board reads the request, e.g. 10ms")
    g.add_argument("--at", metavar="SEC.NS", help="first launch when the board's PTP clock reads this")
    g.add_argument("--period", type=_duration_ns, default=0, metavar="TIME",
                   help="then again every TIME (below 1 s; default: once)")
    g.add_argument("--count", type=ctlargs.wire_int("I", "--count"), default=1, help="launches in all with --period (0: until stopped; default 1)")
    g.add_argument("--guard", type=_int_in(0, 65535, "guard"), default=0, metavar="CYCLES",
                   help="cycles before each launch in which other traffic starts no frame (default 0: the board's, "
                        "enough for its longest frame)")
    g = p.add_argument_group("reboot")
    g.add_argument("--wait", type=ctlargs.positive("--wait"), default=30.0, metavar="S",
                   help="seconds to wait for the board to answer after its reboot (default 30)")
    g.add_argument("--no-wait", action="store_true", help="do not wait for the board to come back")
    g = p.add_argument_group("regs")
    g.add_argument("--csr", metavar="FILE", help="the build's csr.json (OUTPUT_DIR/csr.json), which names the "
                                                "front-end's registers")
    g = p.add_argument_group("rx (received frames the board did not use, by cause, and those it did)")
    g.add_argument("--nonzero", action="store_true", help="only the counters that are not 0")
    p.intermixed = True   # Options before or after the action's words.
    # A group named for an action holds the options only that action takes (ctl_action_help too).
    p.owned_options = {a.dest: g.title.split()[0] for g in p._action_groups if g.title.split()[0] in CTL_ACTIONS
                       for a in g._group_actions}
    p.set_defaults(func=cmd_ctl)

    from ethdaq.host import merge, plot, recv
    p = sub.add_parser("recv", help="receive DAQ datagrams: live rates and losses, HDF5 run file, JSON summary",
                       epilog=recv.EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    recv.add_arguments(p)
    p.set_defaults(func=cmd_recv)

    p = sub.add_parser("merge", help="consume many boards' streams from Kafka, write time slices by PTP time (NeXus)",
                       epilog=merge.EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    merge.add_arguments(p)
    p.set_defaults(func=cmd_merge)

    p = sub.add_parser("plot", help="plot a run file: data rate, timestamp spacing, waveform excerpt",
                       epilog="example:\n  ethdaq plot run.h5 -o run.png",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    plot.add_arguments(p)
    p.set_defaults(func=cmd_plot)
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


def ctl_action_help(parser, action):
    """`ethdaq ctl ACTION --help`: the options every action takes and that action's own group
    (the groups are named for their action), not every action's."""
    ctl = parser._subparsers._group_actions[0].choices["ctl"]
    for a in ctl._actions:   # The action is in the program's name; settings only where they apply.
        if a.dest == "action" or (a.dest == "settings" and action not in CTL_SETTINGS_ACTIONS):
            a.help = argparse.SUPPRESS
    for group in ctl._action_groups:
        if group.title in ("positional arguments", "options") or group.title.split()[0] == action:
            continue
        for a in group._group_actions:
            a.help = argparse.SUPPRESS
    ctl.prog = f"{ctl.prog} {action}"
    return ctl.format_help()


def _main(argv):
    parser = make_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["ctl"] and ("-h" in argv or "--help" in argv):
        action = next((a for a in argv[1:] if a in CTL_ACTIONS), None)
        if action is not None:
            sys.stdout.write(ctl_action_help(parser, action))
            return 0
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from ethdaq.boards import UnknownBoard
    from ethdaq.soc.build import BuildError
    from ethdaq.soc.sim import SimError
    from ethdaq.soc.tools import ToolMissing
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
