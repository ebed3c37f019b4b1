#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""What a stream costs on the wire, against what the link carries.

A channel making `rate` samples per system clock cycle fills a datagram of `payload` bytes (the
DAQ header included) with (payload - header) // sample bytes samples; each datagram costs its
payload plus the UDP, IPv4 and Ethernet headers, the FCS, the preamble and the inter-frame gap on
the wire (WIRE_OVERHEAD). What does not fit the link, the board drops (and counts: the
datagrams' `dropped` field and FLAG_OVERFLOW).

A user's front-end declares each channel's worst-case samples per second instead
(gateware/frontend.py; IDENTIFY carries them): `declared()` makes the same budget of them.
"""

from dataclasses import dataclass

from ethdaq.wire import daqformat

# Bytes on the wire besides the UDP payload: UDP 8, IPv4 20, Ethernet 14, FCS 4, preamble and
# start-of-frame 8, inter-frame gap 12.
WIRE_OVERHEAD = 8 + 20 + 14 + 4 + 8 + 12


@dataclass
class Budget:
    channels:    int
    sample_bits: int
    rate:        float     # Samples per clock cycle per channel.
    sys_clk_hz:  float
    payload:     int       # UDP payload bytes per datagram, DAQ header included.
    link_mbps:   float

    @property
    def samples_per_datagram(self):
        return max(0, (self.payload - daqformat.HEADER_LEN) // (self.sample_bits // 8))

    @property
    def sample_bytes_per_s(self):
        return self.channels * self.sample_bits // 8 * self.rate * self.sys_clk_hz

    @property
    def wire_bytes_per_s(self):
        n = self.samples_per_datagram
        if n == 0:
            return float("inf")
        per_datagram = daqformat.HEADER_LEN + n * self.sample_bits // 8 + WIRE_OVERHEAD
        return self.sample_bytes_per_s / (n * self.sample_bits // 8) * per_datagram

    @property
    def link_bytes_per_s(self):
        return self.link_mbps * 1e6 / 8

    @property
    def fits(self):
        return self.wire_bytes_per_s <= self.link_bytes_per_s

    @property
    def max_rate(self):
        """The largest rate whose stream fits the link at this payload."""
        if self.sample_bytes_per_s == 0:
            return 1.0
        return min(1.0, self.rate * self.link_bytes_per_s / self.wire_bytes_per_s)

    def samples(self):
        """Where the samples' bytes per second come from, for people."""
        return (f"{self.channels} channels x {self.sample_bits // 8} bytes x {self.rate:g} samples/cycle x "
                f"{self.sys_clk_hz / 1e6:g} MHz")

    def arithmetic(self):
        """The sum, for people: samples, their bytes and the wire's, against the link."""
        return (f"{self.samples()} = {self.sample_bytes_per_s / 1e6:.1f} MB/s of samples, "
                f"{self.wire_bytes_per_s / 1e6:.1f} MB/s on the wire at {self.payload}-byte payloads, "
                f"but the link carries {self.link_bytes_per_s / 1e6:.1f} MB/s ({self.link_mbps:g} Mb/s)")


def warning(budget):
    """None when the stream fits the link, else one line: the arithmetic and the rate that fits."""
    if budget.fits:
        return None
    return (f"the board will drop samples: {budget.arithmetic()}; an emulator rate up to "
            f"{budget.max_rate:.4f} fits (or fewer channels, or a larger payload)")


@dataclass
class DeclaredBudget(Budget):
    """Channels at the worst-case rates a front-end declares for them (samples/s each)."""
    rates_hz: tuple = ()

    def samples(self):
        total = " + ".join(f"{r / 1e6:g}" for r in self.rates_hz)
        total = f"({total})" if len(self.rates_hz) > 1 else total
        return f"{total} Msamples/s x {self.sample_bits // 8} bytes"


def declared(rates_hz, sample_bits, sys_clk_hz, payload, link_mbps):
    """The budget of channels making `rates_hz` samples per second each (at least one channel)."""
    rates_hz = tuple(rates_hz)
    return DeclaredBudget(channels=len(rates_hz), sample_bits=sample_bits,
                          rate=sum(rates_hz) / len(rates_hz) / sys_clk_hz, sys_clk_hz=sys_clk_hz,
                          payload=payload, link_mbps=link_mbps, rates_hz=rates_hz)


def frontend_warning(budget):
    """None when a front-end's declared worst case fits the link, else one line: the arithmetic
    and the samples per second that fit."""
    if budget.fits:
        return None
    fit = budget.max_rate * budget.sys_clk_hz * budget.channels
    return (f"the board will drop samples when the front-end makes what it declares as its worst case: "
            f"{budget.arithmetic()}; up to {fit / 1e6:.4g} Msamples/s in all fit at this payload "
            f"(or fewer channels, or a larger payload)")


def channels_in(mask):
    return bin(mask).count("1")
