#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""pulse_height.v in Python: the results it sends, for the tests."""

SEED = 0x12345678
THRESHOLD = 1000
RATE = 2**32 // 256
EVENT_ID_BITS = 12   # Channel 2's events: the peak is their id (pulse_height.toml).


def pulses(threshold=THRESHOLD, rate=RATE, seed=SEED):
    """(peak, width, crossing) of every pulse, in order (an endless generator), when none is
    lost: `crossing` is the cycle after reset in which the signal reached the threshold, the
    cycle whose `time_ns` the pulse's event carries."""
    rng, x = seed, 0
    in_pulse, peak, cycles, crossing = False, 0, 0, 0
    cycle = 0
    while True:
        if x >= threshold:
            if not in_pulse:
                crossing = cycle
            in_pulse, peak, cycles = True, max(peak, x), min(cycles + 1, 0xFFFF)
        elif in_pulse:
            yield peak, cycles, crossing
            in_pulse, peak, cycles = False, 0, 0
        rng ^= (rng << 13) & 0xFFFFFFFF
        rng ^= rng >> 17
        rng ^= (rng << 5) & 0xFFFFFFFF
        x = min(x - (x >> 2) + ((rng & 0xFFF) if rng < rate else 0), 4095)
        cycle += 1


def results(threshold=THRESHOLD, rate=RATE, seed=SEED):
    """(peak, width) of every pulse, in order (an endless generator), when none is lost."""
    for peak, width, _ in pulses(threshold, rate, seed):
        yield peak, width


def events(time_ns, threshold=THRESHOLD, rate=RATE, seed=SEED):
    """(time, id) of every pulse's event, in order (an endless generator), when none is lost:
    the time is `time_ns(cycle)`, the PTP time in the cycle it crossed the threshold, its id the
    peak."""
    for peak, _, crossing in pulses(threshold, rate, seed):
        yield time_ns(crossing), peak
