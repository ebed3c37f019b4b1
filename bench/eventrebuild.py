#!/usr/bin/env python3
#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""What rebuilding a channel of events costs the run file's writer: ethdaq.host.events.reassemble
on blocks of 4096 datagrams (as h5file.Writer calls it at a flush), per datagram size and id
width; CPU time of this process, best of 3, since the machine may be shared.

    .venv/bin/python bench/eventrebuild.py [--words 4000000] [--markdown]
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from bench.table import print_table                 # noqa: E402
from ethdaq.host import events                     # noqa: E402
from ethdaq.host.h5file import EVENT_BLOCK          # noqa: E402


def stream(n_words, sample_bits, id_bits):
    """Words of back-to-back events (random ids, times 100 ns apart) as a front-end sends them."""
    per = events.words_per_event(sample_bits, id_bits)
    n = n_words // per
    rng = np.random.default_rng(0)
    one = [events.pack(10**18 + 100 * i, int(x), sample_bits, id_bits)
           for i, x in enumerate(rng.integers(0, 2**id_bits, min(n, 4096)))]
    words = np.array([w for e in one for w in e], np.uint64)
    return np.resize(words, n * per).astype(f"u{max(1, sample_bits // 8)}"), n


def rebuild(words, size, sample_bits, id_bits):
    """CPU seconds to rebuild `words` cut into datagrams of `size` words, and the events found."""
    d = len(words) // size
    state, found = events.State(), 0
    t0 = time.process_time()
    for a in range(0, d, EVENT_BLOCK):
        k = min(d, a + EVENT_BLOCK) - a
        ones = np.ones(k, np.int64)
        times, _, _, state = events.reassemble(state, words[a * size:(a + k) * size], ones * size, ones,
                                               np.arange(a, a + k), ones * 0, ones * 0, sample_bits, id_bits)
        found += len(times)
    return time.process_time() - t0, found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--words", type=int, default=4_000_000, help="words per row (default 4,000,000)")
    parser.add_argument("--markdown", action="store_true", help="a Markdown table")
    args = parser.parse_args(argv)
    rows = []
    for sample_bits, id_bits, size in ((16, 12, 700), (16, 12, 40), (16, 31, 700), (32, 20, 350), (8, 7, 1400)):
        words, n = stream(args.words, sample_bits, id_bits)
        best = min(rebuild(words, size, sample_bits, id_bits) for _ in range(3))
        cpu, found = best
        rows.append([str(sample_bits), str(id_bits), str(size), f"{found:,}", f"{len(words) / cpu / 1e6:.1f}",
                     f"{found / cpu / 1e6:.2f}"])
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print_table(["sample bits", "id bits", "words/datagram", "events", "Mwords/CPU-s", "Mevents/CPU-s"], rows,
                args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
