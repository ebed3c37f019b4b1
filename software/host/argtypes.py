#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""The argument types and the parser every ethdaq command line uses (the `ethdaq` command in
ethdaq.soc.cli, the receiver's and the plot's own): a usage error is one line naming the
argument, the value given and what it must be, and the exit status is 2."""

import argparse
import ipaddress
import math
import sys


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line, 'Error: ...' and where to look, exit status 2."""

    def error(self, message):
        sys.stderr.write(f"Error: {message} (see '{self.prog} --help')\n")
        sys.exit(2)


def ipv4(text):
    """A dotted IPv4 address, as text."""
    try:
        return str(ipaddress.IPv4Address(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"IP address must be dotted IPv4 like 192.168.1.50, not {text!r}") from None


def port(lo=1):
    """argparse type: a UDP port from `lo` to 65535 (0 where the kernel may choose one)."""
    def parse(text):
        try:
            value = int(text, 0)
        except ValueError:
            value = -1
        if not lo <= value < 65536:
            raise argparse.ArgumentTypeError(f"port must be an integer in {lo}..65535, not {text!r}")
        return value
    return parse


def positive(what, kind=float, zero=False):
    """argparse type: a positive number (or 0 with zero=True) of `what`, finite."""
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not math.isfinite(value) or value < 0 or (value == 0 and not zero):
            noun = "integer" if kind is int else "number"
            least = f"0 or a positive {noun}" if zero else f"a positive {noun}"
            raise argparse.ArgumentTypeError(f"{what} must be {least}, not {text!r}")
        return value
    return parse


def int_in(lo, hi, what, why=None):
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
