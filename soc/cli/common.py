#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""What every `ethdaq` command shares: the one-line usage errors (Parser, CLIError), --json output
(say), the argument types with their one-line messages, and a board's identity as commands
print it."""

import argparse
import json
import re
import sys

from ethdaq.host.argtypes import OneLineParser, int_in, port
from ethdaq.soc import ctlargs

port_arg = port(1)   # A board's or a service's port: 0 is no port here.


class CLIError(Exception):
    pass


class Version(argparse.Action):
    """--version: the package's version and the sources' git revision (asked only when wanted)."""
    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the package version and the git revision of its sources, and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        from ethdaq import __version__
        from ethdaq.soc.gitrev import git_hash
        print(f"ethdaq {__version__} (git {git_hash()})")
        parser.exit()


def say(args, text, **fields):
    """An action's result: `text` for people, or with --json the fields as one JSON object."""
    print(json.dumps(fields) if args.json else text)


class Parser(OneLineParser):
    """argparse, but usage errors are one line: 'Error: ...' plus a hint, exit code 2.

    `intermixed=True`: the options may come before, between or after the positional words
    (`ethdaq ctl config --ip B set payload=1472` as `ethdaq ctl config set payload=1472 --ip B`):
    argparse's intermixed parsing. Plain parsing takes the positional words in one run, so words
    after an option were left over and refused. A subparser is run through parse_known_args, which
    the intermixed parse calls in turn (on Python before 3.13), hence the guard.

    For a parser of subcommands (`ethdaq ctl ACTION`, each with its parents):
    `shared`: the parser of the options every subcommand takes. Given before the subcommand, they
    are read as if given after it (`ethdaq ctl --ip B status` is `ethdaq ctl status --ip B`).
    `owned`: {subcommand: the parser of the options it alone takes}. One of them given to another
    subcommand, or before its own, is a usage error naming the subcommand it is for, once its value
    has passed that subcommand's check; words left over are one too."""

    def __init__(self, *args, intermixed=False, shared=None, owned=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.intermixed, self.shared, self.owned = intermixed, shared, owned or {}
        self._intermixing = False
        self._subcommands = None

    def add_subparsers(self, **kwargs):
        self._subcommands = super().add_subparsers(**kwargs)
        return self._subcommands

    def parse_known_args(self, args=None, namespace=None):
        if self.shared is not None:
            args = self._shared_after_subcommand(list(sys.argv[1:] if args is None else args))
            namespace, rest = super().parse_known_args(args, namespace)
            if rest:
                self._refuse(getattr(namespace, self._subcommands.dest), rest)
            return namespace, rest
        if not self.intermixed or self._intermixing:
            return super().parse_known_args(args, namespace)
        self._intermixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False

    def _shared_after_subcommand(self, args):
        """`args` with the shared options before the subcommand moved after its name; an option of
        one subcommand there is refused."""
        takes_value = {s: a.nargs != 0 for a in self.shared._actions for s in a.option_strings}
        i = 0
        while i < len(args) and args[i].split("=")[0] in takes_value:
            i += 2 if "=" not in args[i] and takes_value[args[i]] else 1
        if i < len(args) and self._owner(args[i]):
            self._refuse(None, args[i:])
        if 0 < i == len(args):
            self.error(f"the following arguments are required: {self._subcommands.metavar}")
        if 0 < i < len(args) and args[i] in self._subcommands.choices:
            return [args[i], *args[:i], *args[i + 1:]]
        if 0 < i < len(args) and args[i] in ("-h", "--help"):
            return args[i:]          # Help: the shared options before it change nothing.
        return args

    def _owner(self, word):
        """The subcommand whose own option `word` is (--name or --name=value), or None."""
        option = word.split("=")[0]
        return next((name for name, p in self.owned.items() if option in p._option_string_actions), None)

    def _refuse(self, name, rest):
        """What subcommand `name` (None: before any) left of the command line, as a one-line error:
        an option another subcommand takes (its value checked first, as that one does), or words."""
        parser = self._subcommands.choices[name] if name else self
        for word in rest:
            owner = self._owner(word)
            if owner:
                self.owned[owner].parse_known_args(rest)   # The value's own error first.
                option = word.split("=")[0]
                parser.error(f"{option} is for {self.prog} {owner}, not {name}" if name else
                             f"{option} is for {self.prog} {owner} and comes after it: "
                             f"{self.prog} {owner} {option} ...")
        if name and not parser._get_positional_actions() and not any(w.startswith("-") for w in rest):
            parser.error(f"{parser.prog} takes no arguments but options, not {' '.join(rest)!r}")
        parser.error(f"unrecognized arguments: {' '.join(rest)}")


def netmask_arg(text):
    from ethdaq.soc.socconfig import parse_netmask
    try:
        return parse_netmask(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e))


def gateway_arg(text):
    from ethdaq.soc.socconfig import parse_gateway
    try:
        return parse_gateway(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e))


def mac_arg(text):
    from ethdaq.soc.socconfig import parse_mac
    try:
        parse_mac(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e))
    return text


def dst_mac_arg(text):
    from ethdaq.wire.protocol import parse_mac
    try:
        mac = parse_mac(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e))
    if mac == bytes(6):
        raise argparse.ArgumentTypeError("destination MAC 00:00:00:00:00:00 means 'resolve by ARP': leave --dst-mac out")
    return mac


def read_key(path):
    """A key file (hex), or a one-line error."""
    from ethdaq.wire.protocol import read_key_file
    try:
        return read_key_file(path)
    except ValueError as e:
        raise CLIError(str(e)) from None


def allow_arg(text):
    """--ctl-allow, checked here for a one-line error; SoCConfig takes the text as it is."""
    from ethdaq.soc.socconfig import parse_allow
    try:
        parse_allow(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def sample_width(text):
    if text not in ("8", "16", "32", "64"):
        raise argparse.ArgumentTypeError(f"sample width must be 8, 16, 32 or 64 bits, not {text!r}")
    return int(text)


log_interval = int_in(-10, 6, "log2 interval")
ptp_domain   = int_in(0, 255, "PTP domain")


def build_id_arg(text):
    if not re.fullmatch(r"[0-9A-Za-z._-]{1,32}", text):
        raise argparse.ArgumentTypeError(f"build id must be 1 to 32 letters, digits, '.', '_' or '-', not {text!r}")
    return text


def freq_arg(text):
    try:
        value = float(text)
    except ValueError:
        value = 0
    if not 1e6 <= value <= 500e6:
        raise argparse.ArgumentTypeError(f"frequency must be in Hz between 1e6 and 500e6, like 60e6, not {text!r}")
    return value


def duration_ns(text):
    """'2ms', '500us', '1.5s', '800ns' -> ns."""
    from ethdaq.wire.protocol import parse_duration_ns
    try:
        return parse_duration_ns(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def flush_ns(text):
    """--flush: a duration from 1us to 1s, or 0/off -> ns."""
    from ethdaq.wire.protocol import parse_flush
    try:
        return parse_flush(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def board_class(name):
    from ethdaq.boards import get_board
    return get_board(name)


def identity_fields(ident):
    from ethdaq.wire import protocol
    return {"board": ident.board, "build_id": ident.build_id, "ident": ident.ident,
              "mac": ident.mac_str, "ip": ident.ip_str, "ctl_port": ident.ctl_port,
              "sys_clk_hz": ident.sys_clk_hz, "eth_dw": ident.eth_dw, "nchannels": ident.nchannels,
              "sample_bits": ident.sample_bits, "max_payload": ident.max_payload,
              "capabilities": [name for bit, name in protocol.CAP_NAMES.items() if ident.capabilities & bit],
              "max_rates": list(ident.max_rates), "event_id_bits": list(ident.event_id_bits)}


def print_identity(ident, as_json):
    from ethdaq.wire.protocol import CAP_FRONTEND
    fields = identity_fields(ident)
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
    if ident.event_channels:
        print(f"{'events':<14}" + ", ".join(f"channel {ch}: {bits}-bit ids" for ch, bits
                                            in sorted(ident.event_channels.items())) + " (published as ev44)")
