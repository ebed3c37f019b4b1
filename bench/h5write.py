#!/usr/bin/env python3
#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Run-file writer throughput: batches like the live receiver's (256 datagrams of 716 16-bit
samples each, the size a 1472-byte datagram carries, streams interleaved) written through
ethdaq.host.h5file.Writer and closed; best of 3 per row, since the machine may be shared.
Writes to tmpfs by default, to measure the writer rather than a disk.

    .venv/bin/python bench/h5write.py [--dir /dev/shm] [--mib 1024] [--streams 1]
"""

import argparse
import os
import sys
import time

import numpy as np

from ethdaq.host.batch import PACKET_DTYPE, Batch
from ethdaq.host.h5file import Writer


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", default="/dev/shm", help="directory for the scratch file (default /dev/shm)")
    parser.add_argument("--mib", type=float, default=1024, help="MiB of samples per row (gzip: a quarter)")
    parser.add_argument("--streams", type=int, default=1, help="interleaved streams (default 1)")
    args = parser.parse_args(argv)
    per_batch, count = 256, 716
    p = np.zeros(per_batch, PACKET_DTYPE)
    p["src_ip"], p["src_port"], p["sample_bits"], p["sample_count"] = 0xC0A80132, 5000, 16, count
    p["stream_id"] = np.arange(per_batch) % args.streams
    p["offset"] = np.arange(per_batch) * count * 2
    data = {"counter": (np.arange(per_batch * count) % 65536).astype(">u2").view(np.uint8),
            "random": np.random.default_rng(0).integers(0, 256, per_batch * count * 2, dtype=np.uint8)}
    path = os.path.join(args.dir, "h5write-bench.h5")
    print(f"compression  data     MiB  MiB/s wall  MiB per CPU-s  file/data   ({args.streams} stream(s))")
    for comp in (None, "lzf", "gzip"):
        for kind, payload in data.items():
            n = max(1, int(args.mib * 2**20 / payload.size / (4 if comp == "gzip" else 1)))
            best = None
            for _ in range(3):
                t0, c0 = time.perf_counter(), time.process_time()
                with Writer(path, compression=comp, overwrite=True) as w:
                    for i in range(n):
                        p["seq"] = i * per_batch // args.streams + np.arange(per_batch) // args.streams
                        p["rx_time_ns"] = time.time_ns()
                        w.write(Batch(p, payload))
                dt, cpu = time.perf_counter() - t0, time.process_time() - c0
                best = (dt, cpu) if best is None else (min(best[0], dt), min(best[1], cpu))
            dt, cpu = best
            total = n * payload.size / 2**20
            print(f"{str(comp):11}  {kind:7}  {total:4.0f}  {total/dt:10.0f}  {total/cpu:13.0f}  "
                  f"{os.path.getsize(path)/(n*payload.size):9.2f}")
            os.unlink(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
