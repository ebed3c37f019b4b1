#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""What every `ethdaq` command shares: the one-line usage errors (Parser, CLIError), --json output
(say), the argument types with their one-line messages, and a board's identity as commands
print it."""

import argparse
import json
import re
from pathlib import Path

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


def netmask_arg(text):
    from ethdaq.soc.socconfig import parse_netmask
    try:
        return parse_netmask(text)
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
    from ethdaq.host.protocol import parse_mac
    try:
        mac = parse_mac(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e))
    if mac == bytes(6):
        raise argparse.ArgumentTypeError("destination MAC 00:00:00:00:00:00 means 'resolve by ARP': leave --dst-mac out")
    return mac


def read_key(path):
    """A key file (hex), or a one-line error."""
    from ethdaq.host.protocol import parse_key
    try:
        return parse_key(Path(path).read_text())
    except OSError as e:
        raise CLIError(f"cannot read key file {path}: {e.strerror}") from None
    except ValueError as e:
        raise CLIError(f"key file {path}: {e}") from None


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
    from ethdaq.host.protocol import parse_duration_ns
    try:
        return parse_duration_ns(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def flush_ns(text):
    """--flush: a duration from 1us to 1s, or 0/off -> ns."""
    from ethdaq.host.protocol import parse_flush
    try:
        return parse_flush(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def board_class(name):
    from ethdaq.boards import get_board
    return get_board(name)


def identity_fields(ident):
    from ethdaq.host import protocol
    return {"board": ident.board, "build_id": ident.build_id, "ident": ident.ident,
              "mac": ident.mac_str, "ip": ident.ip_str, "ctl_port": ident.ctl_port,
              "sys_clk_hz": ident.sys_clk_hz, "eth_dw": ident.eth_dw, "nchannels": ident.nchannels,
              "sample_bits": ident.sample_bits, "max_payload": ident.max_payload,
              "capabilities": [name for bit, name in protocol.CAP_NAMES.items() if ident.capabilities & bit],
              "max_rates": list(ident.max_rates)}


def print_identity(ident, as_json):
    from ethdaq.host.protocol import CAP_FRONTEND
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
