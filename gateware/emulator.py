#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Detector emulator: a sample source per channel for demos and tests.

Modes: counter (0, 1, 2, ...), ramp (sawtooth: +step, back to 0 past `top`) and pulse (a pulse
train with pseudo-random arrival times: in every clock cycle a pulse arrives with probability
rate/2**32, i.e. geometric inter-arrival times, the discrete-time Poisson process; each pulse's
sample is its amplitude, uniform over the whole sample range, 0 to 2**sample_width - 1, mean
(2**sample_width - 1)/2; 32 random bits at most). Counter and ramp emit at a regular rate of rate/2**32 samples per
cycle; rate 0xFFFFFFFF is one sample every cycle, above any link's capacity.

The pulse train has two generators: a xorshift32 decides whether a pulse arrives (its word below
the rate), a second one gives the amplitude (a 16-bit xorshift for samples of up to 16 bits,
Metcalf's (7, 9, 8), which takes every non-zero value once per period; a xorshift32 for wider
ones). With one word for both, an amplitude would be the top bits of a word already known to be
below the rate (below rate/2**16 at 16 bits: a maximum of 65 at rate 0.001).
"""

from migen import *

from litex.gen import *

from litex.soc.interconnect import stream
from litex.soc.interconnect.csr import *

from ethdaq.gateware.csr import CSRConfig

MODE_OFF, MODE_COUNTER, MODE_RAMP, MODE_PULSE = 0, 1, 2, 3


def xorshift32(x):
    """One xorshift32 step (Marsaglia), as Migen expressions; never reaches 0 from a non-zero seed."""
    a = x ^ (x << 13)[:32]
    b = a ^ (a >> 17)
    return b ^ (b << 5)[:32]


def xorshift32_ref(x):
    """The same step in Python, for tests."""
    x ^= (x << 13) & 0xffffffff
    x ^= x >> 17
    x ^= (x << 5) & 0xffffffff
    return x


def xorshift16(x):
    """One step of Metcalf's 16-bit xorshift (7, 9, 8), as Migen expressions: period 65535."""
    a = x ^ (x << 7)[:16]
    b = a ^ (a >> 9)
    return b ^ (b << 8)[:16]


def xorshift16_ref(x):
    """The same step in Python, for tests."""
    x ^= (x << 7) & 0xffff
    x ^= x >> 9
    x ^= (x << 8) & 0xffff
    return x


def amplitude_width(sample_width):
    return 16 if sample_width <= 16 else 32


# The amplitude generator per width: its step and the constant its seed is mixed with.
_AMPLITUDE = {16: (xorshift16, 0xACE1), 32: (xorshift32, 0x6A09E667)}


def amplitude_seed(seed, sample_width=16):
    """The amplitude generator's state for a pulse-train seed, as the gateware loads it: the
    seed's low bits mixed with a constant, never 0."""
    w = amplitude_width(sample_width)
    return ((seed ^ _AMPLITUDE[w][1]) & (2**w - 1)) or 1


class DetectorEmulator(LiteXModule):
    """`with_counters`: 64-bit CSRs `count` (samples produced) and `stall` (cycles a sample waited
    for the sink), for tests of the streamer's back-pressure. Off in the SoC: the firmware does
    not read them and the four emulators' counters cost about 600 LUTs of the ECP5-25F (the
    streamer itself counts every dropped sample)."""
    def __init__(self, sample_width=16, seed=1, with_counters=False):
        self.source = source = stream.Endpoint([("data", sample_width)])

        self._mode  = CSRConfig(2,  description="0 off, 1 counter, 2 ramp, 3 pulse train.")
        self._rate  = CSRConfig(32, reset=2**31, description="Samples (or pulse probability) per cycle, times 2**32.")
        self._step  = CSRConfig(sample_width, reset=1, description="Ramp step.")
        self._top   = CSRConfig(sample_width, reset=2**sample_width - 1, description="Ramp returns to 0 after this value.")
        self._seed  = CSRConfig(32, reset=seed, description="Pulse-train seed (written: restart both sequences).")
        if with_counters:
            self._count = CSRStatus(64, description="Samples produced (accepted by the sink).")
            self._stall = CSRStatus(64, description="Cycles a produced sample waited for the sink (back-pressure).")

        # # #

        mode  = self._mode.storage
        rate  = self._rate.storage
        value = Signal(sample_width)
        phase = Signal(33)
        rng   = Signal(32, reset=seed)
        aw    = amplitude_width(sample_width)
        astep, amix = _AMPLITUDE[aw]
        arng  = Signal(aw, reset=amplitude_seed(seed, sample_width))  # Amplitudes: independent of `rng`.
        fire  = Signal()
        self.rng, self.arng = rng, arng  # For tests.

        # The pulse decision `rng < rate` (a 32-bit carry chain) is made a cycle ahead, from the
        # next value of `rng`, into a register: the same pulses in the same cycles, and no carry
        # chain between the comparison and the sink's admission logic (a rate written by the CPU
        # applies a cycle later).
        rng_next   = Signal(32)
        pulse_fire = Signal(reset=int(seed < 2**31))  # rng < rate, for the reset values.
        self.comb += [
            rng_next.eq(xorshift32(rng)),
            If(self._seed.re, rng_next.eq(Mux(self._seed.storage == 0, 1, self._seed.storage))),
        ]
        # A written seed restarts the amplitudes too, from amplitude_seed(seed).
        arng_seed = Signal(aw)
        self.comb += arng_seed.eq(self._seed.storage[:aw] ^ amix)
        self.sync += [
            rng.eq(rng_next),
            pulse_fire.eq(rng_next < rate),
            If(self._seed.re,
                arng.eq(Mux(arng_seed == 0, 1, arng_seed)),
            ).Else(
                arng.eq(astep(arng)),
            ),
        ]
        self.comb += [
            If(mode == MODE_PULSE,
                fire.eq(pulse_fire)
            ).Else(
                fire.eq(phase[32])
            )
        ]
        self.sync += phase.eq(phase[:32] + rate)

        # A produced sample is held until the sink takes it; new arrivals meanwhile are not
        # queued (a real detector would lose them too) but the waiting time is counted.
        # The ramp returns to 0 when value + step (not truncated) passes `top`: the same test as
        # value > top - step, from the sum it steps to, so one carry chain serves both.
        ramp_sum = Signal(sample_width + 1)
        self.comb += ramp_sum.eq(value + self._step.storage)
        self.sync += [
            If(source.valid & source.ready,
                source.valid.eq(0),
                If(mode == MODE_RAMP,
                    value.eq(Mux(ramp_sum > self._top.storage, 0, ramp_sum[:sample_width]))
                ).Else(
                    value.eq(value + 1)
                )
            ),
            If((mode != MODE_OFF) & fire & ~(source.valid & ~source.ready),
                source.valid.eq(1),
            ),
            If(mode == MODE_OFF,
                source.valid.eq(0),
                value.eq(0),
            ),
        ]
        amplitude = Signal(sample_width)
        self.sync += If(fire & ~(source.valid & ~source.ready), amplitude.eq(arng[aw - sample_width:] if sample_width <= aw else arng))
        self.comb += [
            source.data.eq(Mux(mode == MODE_PULSE, amplitude, value)),
        ]
        if with_counters:
            count = Signal(64)
            stall = Signal(64)
            self.sync += [
                If(source.valid & source.ready, count.eq(count + 1)),
                If(source.valid & ~source.ready, stall.eq(stall + 1)),
            ]
            self.comb += [
                self._count.status.eq(count),
                self._stall.status.eq(stall),
            ]


def add_emulators(module, streamer, with_counters=False):
    """One DetectorEmulator per streamer input, added to `module` as emu0, emu1, ... (their CSR
    names) with seeds 1, 2, ...; returns them."""
    emulators = []
    for i, sink in enumerate(streamer.sinks):
        emu = DetectorEmulator(sample_width=streamer.sample_width, seed=i + 1, with_counters=with_counters)
        setattr(module.submodules, f"emu{i}", emu)
        module.comb += emu.source.connect(sink)
        emulators.append(emu)
    return emulators
