#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""pulse_height.v in Python: the (peak, width) results it sends, for the tests."""

SEED = 0x12345678
THRESHOLD = 1000
RATE = 2**32 // 256


def results(threshold=THRESHOLD, rate=RATE, seed=SEED):
    """(peak, width) of every pulse, in order (an endless generator), when none is lost."""
    rng, x = seed, 0
    in_pulse, peak, cycles = False, 0, 0
    while True:
        if x >= threshold:
            in_pulse, peak, cycles = True, max(peak, x), min(cycles + 1, 0xFFFF)
        elif in_pulse:
            yield peak, cycles
            in_pulse, peak, cycles = False, 0, 0
        rng ^= (rng << 13) & 0xFFFFFFFF
        rng ^= rng >> 17
        rng ^= (rng << 5) & 0xFFFFFFFF
        x = min(x - (x >> 2) + ((rng & 0xFFF) if rng < rate else 0), 4095)
