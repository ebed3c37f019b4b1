#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""`ethdaq ctl ACTION`: one request to a board's control port (docs/protocol.md), its answer
printed for people or as JSON. Each action is a subcommand with its own options and help (ACTIONS:
its handler, its help, its options, the words it takes); the options every action takes
(_shared_options) may come before or after it. An option of another action is a one-line usage
error naming that action (Parser.owned)."""

import argparse
import ipaddress
import json
import sys
from typing import Callable, NamedTuple, Optional

from ethdaq.host import argtypes
from ethdaq.host.argtypes import int_in, ipv4
from ethdaq.soc import ctlargs
from ethdaq.soc.cli.common import (CLIError, Parser, dst_mac_arg, duration_ns, flush_ns, port_arg, print_identity,
                                   read_key, say)
from ethdaq.wire.protocol import EMULATOR_RATE_DEFAULT


def cmd_ctl(args):
    from ethdaq.host.ctl import ControlClient, ControlRefused, ControlTimeout
    from ethdaq.wire import protocol
    key = read_key(args.key_file) if args.key_file else None
    with ControlClient(args.ip, args.port, timeout=args.timeout, key=key) as client:
        try:
            return ACTIONS[args.action].handler(client, args) or 0
        except ControlRefused as e:
            if e.code == protocol.ERR_BAD_VALUE and e.refusal is None and args.action in ("start", "config"):
                raise CLIError(f"{e}: {_stream_ranges_text(client)}") from None
            raise CLIError(str(e)) from None
        except ControlTimeout as e:
            raise CLIError(str(e)) from None


def _show(args, fields, width, float_format=""):
    """A reply's fields: one JSON object with --json, else a line each, name then value (numbers
    with a fraction in `float_format`)."""
    if args.json:
        print(json.dumps(fields))
        return
    for k, v in fields.items():
        print(f"{k:<{width}}{v:{float_format if isinstance(v, float) else ''}}")


def _ctl_identify(client, args):
    print_identity(client.identify(), args.json)


def _ctl_status(client, args):
    from ethdaq.wire.protocol import format_mac
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
        return
    for k, v in st.items():
        if k != "streams":
            print(f"{k:<16}{v}")
    if streams:
        print(f"streams of run {streams.run}:")
        print(f"  {'stream':>6} {'enabled':>7} {'datagrams':>12} {'bytes':>16} {'dropped':>12}")
        for c in streams.streams:
            print(f"  {c.stream:>6} {'yes' if c.enabled else 'no':>7} {c.datagrams:>12} "
                  f"{c.bytes:>16} {c.dropped:>12}")


def _ctl_ptp(client, args):
    from ethdaq.wire import protocol
    p = client.ptp_status()
    d = dict(p.__dict__, state=p.state_name, servo_state=p.servo_name,
             role=protocol.PTP_ROLES.get(p.role, p.role), transport="l2" if p.transport else "udp4",
             freq_ppb=p.freq_scaled_ppb / 65536)
    del d["freq_scaled_ppb"]
    for k in ("clock_identity", "parent_identity", "gm_identity"):
        d[k] = d[k].hex()
    _show(args, d, 20, ".3f")


def _ctl_emulator(client, args):
    from ethdaq.wire import protocol
    client.emulator(args.mode, protocol.emulator_rate_fixed(args.rate), args.seed)
    say(args, f"emulator: {args.mode}, {args.rate:g} samples/cycle per channel",
        mode=args.mode, rate=args.rate, seed=args.seed)
    if args.mode != "off":
        _warn_budget(client, rate=args.rate)


def _ctl_claim(client, args):
    granted, holder, left = client.claim(args.lease)
    if not granted:
        raise CLIError(f"the board is held by {ipaddress.IPv4Address(holder)} for another "
                       f"{left / 1000:.1f} s (it releases with `ethdaq ctl release`, or the lease runs out)")
    say(args, f"this host ({ipaddress.IPv4Address(holder)}) controls the board for {left / 1000:.0f} s; "
              f"every start, stop or emulator request renews it",
        controller=str(ipaddress.IPv4Address(holder)), lease_ms=left)


def _ctl_release(client, args):
    client.release()
    say(args, "released: any allowed host may now control the board", released=True)


def _ctl_reboot(client, args):
    rebooted, st = client.reboot(wait=None if args.no_wait else args.wait)
    fields = dict(rebooted=bool(rebooted), boots=st.boots)
    if args.no_wait:
        say(args, "rebooting" if rebooted else f"the board has rebooted already (boot {st.boots})", **fields)
    else:
        say(args, f"{'rebooted' if rebooted else 'the board had rebooted already'}: boot {st.boots} "
                  f"since power-on, reset cause {st.reset_cause_name}, up {st.uptime_ms} ms",
            **fields, reset_cause=st.reset_cause_name, uptime_ms=st.uptime_ms)


def _ctl_config(client, args):
    from ethdaq.wire import protocol
    verb = args.settings[0] if args.settings else "get"
    if verb == "get" and len(args.settings) <= 1:
        cfg = client.config()
    elif verb == "set" and len(args.settings) > 1:
        cfg = _config_set(client, args.settings[1:])
    else:
        raise CLIError("usage: ethdaq ctl config [get] | config set NAME=VALUE [NAME=VALUE ...] "
                       f"(NAME one of {', '.join(n for n in protocol.CONFIG_FIELDS if n not in protocol.CONFIG_FIXED)})")
    _show(args, protocol.format_config(cfg), 20)


def _config_set(client, assignments):
    """CONFIG_SET of NAME=VALUE words, checked against the board first; the board's settings after it."""
    from ethdaq.wire import protocol
    try:
        fields = dict(protocol.parse_config_assignment(t) for t in assignments)
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
    return cfg


def _ctl_rx(client, args):
    stats = client.rx_stats()
    if args.nonzero:
        stats = {name: v for name, v in stats.items() if v}
    if args.json:
        print(json.dumps(stats))
    else:
        print("\n".join(format_rx_stats(stats)))


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
    from ethdaq.wire.protocol import EMULATOR_MODES
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
    from ethdaq.wire import protocol
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
    from ethdaq.wire import protocol
    ip, netmask, gateway = (fields.get(n, getattr(cfg, n)) for n in ("ip", "netmask", "gateway"))
    if not protocol.gateway_valid(ip, netmask, gateway):
        net = ipaddress.IPv4Network((ip, bin(netmask).count("1")), strict=False)
        raise CLIError(f"gateway must be a host of the board's subnet {net} other than the board "
                       f"({ipaddress.IPv4Address(ip)}), or 0.0.0.0 for none, not {ipaddress.IPv4Address(gateway)}")


def _start_settings(client, args):
    """STREAM_START's fields: the options given, the board's settings (CONFIG_GET) for the others;
    payload and channel masks checked against the board (IDENTIFY) before anything is started."""
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
    say(args, text, run=run, was_running=bool(running))


def _ctl_start(client, args):
    from ethdaq.wire.protocol import format_mac
    from ethdaq.wire import protocol
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


def _ctl_launch(client, args):
    from ethdaq.wire import protocol
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
            raise CLIError("this board's build has no launcher (build it with --with-launcher)")
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
    from ethdaq.wire import protocol
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
    from ethdaq.wire import protocol
    verb = args.settings[0] if args.settings else "read"
    if verb not in ("read", "clear") or len(args.settings) > 1:
        raise CLIError("usage: ethdaq ctl probe [read|clear] --board ADDR")
    ident = client.identify()
    if not ident.capabilities & protocol.CAP_PROBES:
        raise CLIError("this board's build has no latency probes (build it with --with-probes)")
    if verb == "clear":
        client.probe_clear()
        say(args, "latency probes cleared: statistics from now on", cleared=True)
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
    from ethdaq.wire import protocol
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
    from ethdaq.wire import protocol
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
    from ethdaq.wire import protocol
    if not stats:
        return ["  (no counter to show)"]
    return [f"  {name:<16} {value:>14}  "
            f"{protocol.RX_COUNTER_DESCRIPTIONS.get(name, 'a counter this host does not know (a newer board)')}"
            for name, value in stats.items()]


def _ctl_regs(client, args):
    from ethdaq.host import csrmap
    from ethdaq.wire import protocol
    if not args.csr:
        raise CLIError("ethdaq ctl regs needs the build's register map: --csr OUTPUT_DIR/csr.json")
    try:
        regs = csrmap.frontend_registers(args.csr)
    except ValueError as e:
        raise CLIError(str(e)) from None
    writes, reads = [], []
    for word in args.settings:
        name, eq, value = word.partition("=")
        name = name.removeprefix("frontend_")
        if name not in regs:
            raise CLIError(f"no front-end register {name!r}; there are: {', '.join(regs)}")
        reg = regs[name]
        if eq:
            if not reg.writable:
                raise CLIError(f"front-end register {name!r} is read-only")
            try:
                v = int(value, 0)
            except ValueError:
                raise CLIError(f"{word!r}: the value must be a number") from None
            try:
                writes.append((reg, reg.to_words(v)))
            except ValueError as e:
                raise CLIError(f"{word!r}: {e}") from None
        reads.append(name)
    ident = client.identify()
    if not ident.capabilities & protocol.CAP_FRONTEND:
        raise CLIError("this board's build has no front-end (build it with --frontend)")
    for reg, words in writes:
        client.reg_write(reg.offset, words)
    values = {name: regs[name].from_words(client.reg_read(regs[name].offset, regs[name].words))
              for name in reads or regs}
    if args.json:
        print(json.dumps(values))
        return
    for name, v in values.items():
        print(f"  {name:<24} {v:>12}  0x{v:x}{'' if regs[name].writable else '  (read-only)'}")


def _shared_options():
    """The options every action takes, before or after it."""
    p = Parser(add_help=False)
    p.add_argument("--ip", "--board", dest="ip", type=ipv4, required=True, metavar="ADDR",
                   help="the board's IPv4 address (--board ADDR is the same, kept for scripts; elsewhere "
                        "--board names a kind of board)")
    p.add_argument("--port", type=port_arg, default=7000, help="control port (default 7000)")
    p.add_argument("--timeout", type=argtypes.positive("--timeout"), default=2.0, help="seconds per try (3 tries)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--key-file", metavar="FILE", help="the board's shared key (hex): sign every request")
    return p


def _start_options(p):
    g = p.add_argument_group("start options")
    g.add_argument("--dst-ip", type=ipv4, help="where datagrams go (default: this host, as the board sees it)")
    g.add_argument("--dst-port", type=port_arg, help="destination UDP port (default: the board's setting, 5000)")
    g.add_argument("--payload", type=ctlargs.setting("payload"), help="UDP payload bytes per datagram, header "
                                                                      "included (default: the board's setting, 1472)")
    g.add_argument("--enable", type=ctlargs.mask("enable"), help="channel mask (default: the board's setting, all)")
    g.add_argument("--dst-mac", type=dst_mac_arg, help="destination MAC, skipping ARP (default: resolved by ARP)")
    g.add_argument("--backpressure", type=ctlargs.mask("backpressure"),
                   help="channels that stall instead of dropping (mask; default: the board's setting, 0)")
    g.add_argument("--gap", type=ctlargs.setting("gap"),
                   help="idle clock cycles after each datagram (rate limit; default: the board's setting, 0)")
    g.add_argument("--flush", type=flush_ns, metavar="TIME",
                   help="a channel's partial datagram leaves this long after its last sample, e.g. 100us "
                        "(1us to 1s, 0 or off: only when full or at stop; default: the board's setting, 1ms)")


def _emulator_options(p):
    g = p.add_argument_group("emulator options")
    g.add_argument("--mode", choices=["off", "counter", "ramp", "pulse"], default="counter")
    g.add_argument("--rate", type=ctlargs.rate, default=EMULATOR_RATE_DEFAULT,
                   help=f"samples per clock cycle per channel, 0..1 (default {EMULATOR_RATE_DEFAULT:g}; "
                        f"a warning says when the board's link cannot carry it)")
    g.add_argument("--seed", type=ctlargs.setting("emulator_seed"), default=1, help="pulse-train seed")


def _claim_options(p):
    g = p.add_argument_group("claim options")
    g.add_argument("--lease", type=int_in(0, 3600, "lease"), default=0, metavar="S",
                   help="seconds the board stays this host's without a request (0: the board's default, 60)")


def _launch_options(p):
    g = p.add_argument_group("launch arm options (boards built --with-launcher: docs/realtime.md)")
    g.add_argument("--to", metavar="HOST:PORT", help="the launched UDP datagram's destination")
    g.add_argument("--to-mac", metavar="MAC", help="its destination MAC (the board does not ARP for launches)")
    g.add_argument("--from-port", type=port_arg, default=9100, help="its source UDP port (default 9100)")
    g.add_argument("--data", default="", help="its payload, as text (default: empty)")
    g.add_argument("--in", dest="launch_in", type=duration_ns, metavar="TIME",
                   help="first launch this long after the board reads the request, e.g. 10ms")
    g.add_argument("--at", metavar="SEC.NS", help="first launch when the board's PTP clock reads this")
    g.add_argument("--period", type=duration_ns, default=0, metavar="TIME",
                   help="then again every TIME (below 1 s; default: once)")
    g.add_argument("--count", type=ctlargs.wire_int("I", "--count"), default=1,
                   help="launches in all with --period (0: until stopped; default 1)")
    g.add_argument("--guard", type=int_in(0, 65535, "guard"), default=0, metavar="CYCLES",
                   help="cycles before each launch in which other traffic starts no frame (default 0: the board's, "
                        "enough for its longest frame)")


def _reboot_options(p):
    g = p.add_argument_group("reboot options")
    g.add_argument("--wait", type=argtypes.positive("--wait"), default=30.0, metavar="S",
                   help="seconds to wait for the board to answer after its reboot (default 30)")
    g.add_argument("--no-wait", action="store_true", help="do not wait for the board to come back")


def _regs_options(p):
    g = p.add_argument_group("regs options")
    g.add_argument("--csr", metavar="FILE", help="the build's csr.json (OUTPUT_DIR/csr.json), which names the "
                                                "front-end's registers")


def _rx_options(p):
    g = p.add_argument_group("rx options")
    g.add_argument("--nonzero", action="store_true", help="only the counters that are not 0")


class CtlAction(NamedTuple):
    handler: Callable                    # (client, args) -> exit status (None: 0).
    help:    str                         # One line, in `ethdaq ctl --help` and atop its own.
    options: Optional[Callable] = None   # Adds the options only this action takes to a parser.
    words:   Optional[tuple] = None      # The words after the action: (metavar, help).


ACTIONS = {
    "identify": CtlAction(_ctl_identify, "the board's build, addresses, clock, channels and capabilities"),
    "start":    CtlAction(_ctl_start, "start a run: the board streams its channels' samples as UDP datagrams",
                          _start_options),
    "stop":     CtlAction(_ctl_stop, "stop the run"),
    "status":   CtlAction(_ctl_status, "the run, counters, link (PHY over MDIO) and the per-stream table"),
    "ptp":      CtlAction(_ctl_ptp, "the board's PTP port and clock: state, role, servo, identities"),
    "emulator": CtlAction(_ctl_emulator, "the sample emulators' mode and rate", _emulator_options),
    "claim":    CtlAction(_ctl_claim, "hold the board: only its controller may change it (docs/protocol.md)",
                          _claim_options),
    "release":  CtlAction(_ctl_release, "let the board go: any allowed host may then control it"),
    "reboot":   CtlAction(_ctl_reboot, "reset every core; waits until the board answers again", _reboot_options),
    "config":   CtlAction(_ctl_config, "the board's settings (stream, emulator, PTP), or set some",
                          words=("get|set NAME=VALUE",
                                 "get (the default), or set NAME=VALUE ... (e.g. payload=1024 ptp_role=slave)")),
    "launch":   CtlAction(_ctl_launch, "time-triggered frames, ahead of all traffic (boards built --with-launcher)",
                          _launch_options, ("arm|stop|status", "arm, stop or status (the default)")),
    "probe":    CtlAction(_ctl_probe, "latency per frame class from the probes, or clear them "
                                      "(boards built --with-probes)",
                          words=("read|clear", "read (the default) or clear")),
    "rules":    CtlAction(_ctl_rules, "the receive rules and their counters, or set one "
                                      "(boards built --with-classifier)",
                          words=("show|set INDEX NAME=VALUE",
                                 "show (the default) or set INDEX action=drop port=9100 ...")),
    "regs":     CtlAction(_ctl_regs, "read or write the front-end's registers (boards built --frontend)",
                          _regs_options,
                          ("NAME[=VALUE]", "the front-end's registers: all (the default), NAME or NAME=VALUE ...")),
    "rx":       CtlAction(_ctl_rx, "received frames the board did not use, by cause, and those it did",
                          _rx_options),
}

EXAMPLES = [
    "ethdaq ctl identify --ip 192.168.1.50",
    "ethdaq ctl emulator --ip 192.168.1.50 --mode counter --rate 0.01",
    "ethdaq ctl start --ip 192.168.1.50 --dst-port 5000 --payload 1472",
    "ethdaq ctl stop --ip 192.168.1.50",
    "ethdaq ctl config --ip 192.168.1.50",
    "ethdaq ctl config set payload=1024 dst_port=6000 ptp_role=slave --ip 192.168.1.50",
    "ethdaq ctl launch arm --board 192.168.1.50 --to 192.168.1.10:9100 --to-mac 02:00:00:00:00:01 "
    "--data trigger --in 10ms --period 1ms --count 100",
    "ethdaq ctl probe --board 192.168.1.50",
    "ethdaq ctl rules set 1 action=drop port=9100 --board 192.168.1.50",
    "ethdaq ctl regs threshold=1500 --csr build/sim/csr.json --board 192.168.1.50",
    "ethdaq ctl rx --nonzero --board 192.168.1.50",
]


DESCRIPTION = """\
One request to a board's control port, its answer printed (with --json, as one JSON document).
start, stop, emulator, claim, release, reboot and config set only from the board's controller
(docs/protocol.md). The options every action takes (--ip/--board ADDR, --port, --timeout, --json,
--key-file) come before or after the action, an action's own options after it; `ethdaq ctl
ACTION --help` lists them."""


def _examples(lines):
    return "examples:\n" + "".join(f"  {line}\n" for line in lines) if lines else None


def add_parser(sub):
    shared = _shared_options()
    p = sub.add_parser("ctl", help="talk to a board's control port", description=DESCRIPTION,
                       epilog=_examples(EXAMPLES), formatter_class=argparse.RawDescriptionHelpFormatter,
                       shared=shared)
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=Parser,
                               title="actions")
    for name, action in ACTIONS.items():
        own = Parser(prog=f"{p.prog} {name}", add_help=False)
        if action.options:
            action.options(own)
        p.owned[name] = own
        examples = [e for e in EXAMPLES if e.startswith(f"ethdaq ctl {name} ")]
        a = actions.add_parser(name, help=action.help, description=action.help, parents=[shared, own],
                               intermixed=action.words is not None, epilog=_examples(examples),
                               formatter_class=argparse.RawDescriptionHelpFormatter)
        if action.words:
            a.add_argument("settings", nargs="*", metavar=action.words[0], help=action.words[1])
    p.set_defaults(func=cmd_ctl)
