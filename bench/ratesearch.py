#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""The highest rate a receiver holds, as the receive benches look for it (bench/recvrate.py
without Kafka, bench/scaleout.py with it): an unpaced short run gives the ceiling; short runs
bisect below it; then full-length runs, because a short run hides a small deficit in the
buffers (the socket's, the publisher's ring) for a while: they step down 10 % until one holds
and bisect between it and the lowest failure until the two are within `close` of each other."""


def highest_held_rate(measure, held, offered, received_per_s, steps, full_steps, close, ceiling=None):
    """`measure(rate, full)`: one run at `rate` per second (0: unpaced), short or full-length;
    `held(run)`: it kept up; `offered(run)`, `received_per_s(run)`: what an unpaced run sent and
    what the receiver took, per second. `ceiling`: the unpaced short run, if the caller has made
    it. Returns (rate, the held full-length run), or (0, None) when none held."""
    ceiling = ceiling if ceiling is not None else measure(0, False)
    lo, hi = 0.0, offered(ceiling)
    rate = round(0.95 * min(hi, received_per_s(ceiling)), -2)
    for _ in range(steps):
        if rate <= 0:                                 # rate 0 would be unpaced
            break
        lo, hi = (rate, hi) if held(measure(rate, False)) else (lo, rate)
        rate = round((lo + hi) / 2, -2)
    best, best_rate, rate = None, 0, lo or rate
    for _ in range(full_steps):
        if rate <= 0:
            break
        m = measure(rate, True)
        if held(m):
            best, best_rate = m, rate
        else:
            hi = rate
        rate = round((best_rate + hi) / 2, -2) if best else round(0.9 * rate, -2)
        if best and hi - best_rate <= close * hi:
            break
    return (best_rate, best) if best else (0, None)
