#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""The values users type for a board's settings (`ethdaq ctl`, `ethdaq sim --stream`): argparse
types whose ranges come from the control protocol's table (ethdaq.wire.protocol), so an
out-of-range value is a one-line usage error before anything is sent; and the link budget's
warning (ethdaq.host.linkbudget) for the settings a run will use."""

import argparse

from ethdaq.host import linkbudget
from ethdaq.wire import protocol


def _integer(text, base=0):
    try:
        return int(text, base)
    except (TypeError, ValueError):
        return None


def setting(name, base=0):
    """argparse type: an integer the setting `name` (a CONFIG_FIELDS name) takes on the wire."""
    def parse(text):
        value = _integer(text, base)
        lo, hi = protocol.field_range(name)
        if value is None or not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{name} must be an integer from {lo} to {hi}, not {text!r}")
        return value
    return parse


def mask(name):
    """argparse type: a channel mask (decimal or 0x hex) within the protocol's width."""
    def parse(text):
        value = _integer(text)
        lo, hi = protocol.field_range(name)
        if value is None or not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{name} must be a channel mask from 0x{lo:x} to 0x{hi:x} "
                                             f"(bit i: channel i), not {text!r}")
        return value
    return parse


def wire_int(code, what):
    """argparse type: an integer that fits a wire field of format `code` ('I': 0..2**32-1)."""
    def parse(text):
        value = _integer(text)
        lo, hi = protocol.wire_range(code)
        if value is None or not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{what} must be an integer from {lo} to {hi}, not {text!r}")
        return value
    return parse


def rate(text):
    """argparse type: the emulator's rate, a fraction of the clock from 0 to 1."""
    try:
        protocol.emulator_rate_fixed(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return float(text)


def link_mbps(status=None, board=None):
    """The link's speed: as the PHY reports it (STATUS), else the board's (boards/NAME.py link),
    else 1000 Mb/s."""
    if status is not None and status.link_speed:
        return status.link_speed
    if board is not None:
        return {"10M": 10, "100M": 100, "1G": 1000, "10G": 10000}.get(board.link, 1000)
    return 1000


def budget_warning(ident, cfg, status, rate=None, payload=None, enable=None):
    """The link budget's warning for a board (IDENTIFY, CONFIG_GET, STATUS) running its emulators
    at `rate` (default: its setting) with `payload` and `enable` (default: its settings); None
    when it fits or the emulators are off."""
    if rate is None:
        if cfg.emulator_mode == protocol.EMULATOR_MODES["off"]:
            return None
        rate = protocol.emulator_rate_fraction(cfg.emulator_rate)
    b = linkbudget.Budget(channels=linkbudget.channels_in(cfg.enable if enable is None else enable),
                          sample_bits=ident.sample_bits, rate=rate, sys_clk_hz=ident.sys_clk_hz,
                          payload=cfg.payload if payload is None else payload, link_mbps=link_mbps(status))
    return linkbudget.warning(b)


def frontend_budget_warning(ident, cfg, status, payload=None, enable=None):
    """The link budget's warning for a board's front-end (IDENTIFY's declared rates) on the
    channels `enable` (default: its setting) at `payload` (default: its setting): None when their
    declared worst case fits, or when none of them declares a rate. Undeclared channels are left
    out of the sum, and the warning names them."""
    enable = cfg.enable if enable is None else enable
    channels = [i for i in range(ident.nchannels) if enable >> i & 1]
    rates = [ident.max_rates[i] for i in channels if ident.max_rates[i]]
    if not rates:
        return None
    b = linkbudget.declared(rates, sample_bits=ident.sample_bits, sys_clk_hz=ident.sys_clk_hz,
                            payload=cfg.payload if payload is None else payload, link_mbps=link_mbps(status))
    text = linkbudget.frontend_warning(b)
    unknown = [str(i) for i in channels if not ident.max_rates[i]]
    if text and unknown:
        text += f"; not counted: channel{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}, with no declared rate"
    return text


def declared_rates_text(ident):
    """IDENTIFY's declared front-end rates for people: 'channel 0 40 Msamples/s, channel 1
    undeclared', or None when no channel declares one."""
    if not any(ident.max_rates):
        return None
    return ", ".join(f"channel {i} " + (f"{r / 1e6:g} Msamples/s" if r else "undeclared")
                     for i, r in enumerate(ident.max_rates))


def stream_ranges(ident):
    """The stream settings' ranges on a board (an Identity), for a refusal's message."""
    out = []
    for name in ("dst_port", "payload", "enable", "backpressure"):
        lo, hi = protocol.board_field_range(name, ident)
        out.append(f"{name} 0x{lo:x}..0x{hi:x}" if name in ("enable", "backpressure") else f"{name} {lo}..{hi}")
    return ", ".join(out) + ", flush 0 (off) or 1us..1s"
