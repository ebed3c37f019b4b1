#!/usr/bin/env python3
#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Two simulated boards, PTP master and slave, and Linux on one switch: several boards end to end.

Both boards are complete DAQSoCs with their streamers (VexRiscv running the real firmware,
LiteEth, the timestamp unit) in one Verilator model on one 125 MHz clock, as bench/ptp2.py
builds them; a learning switch in the testbench joins their GMII pins and a tap in a network
namespace (bench/verilator/tb_boards.cpp). The boards synchronise over PTP through the switch,
and Linux in the namespace reaches both: ping, `ethdaq ctl`, receivers.

    .venv/bin/python bench/boards2.py [--seconds 60] [--ppm 50]   # boot, lock, ping both, a table

Separate simulations cannot synchronise: each runs about a thousand times slower than real time,
at its own pace, so their clocks drift apart by far more than any servo corrects. In one model
both boards see the same simulated time. Simulated figures only.
"""

import argparse
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO.parent) not in sys.path:
    sys.path.insert(0, str(REPO.parent))
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import ptp2  # noqa: E402
from ethdaq.soc.sim import SimSession  # noqa: E402

TB = REPO / "bench" / "verilator" / "tb_boards.cpp"
HOST_IP = "192.168.78.1"
BOARDS = {
    # build name: (PTP role, IP, MAC)
    "e2em": ("master", "192.168.78.50", "10:e2:d5:00:01:01"),
    "e2es": ("slave",  "192.168.78.51", "10:e2:d5:00:01:02"),
}
TAGS = {"e2em": "M", "e2es": "S"}


def build(output_dir, verbose=False, **kwargs):
    """Both boards (with streamers) and the switch testbench; the run directory."""
    return ptp2.build(output_dir, tb=TB, boards=BOARDS, with_streamer=True, verbose=verbose, **kwargs)


class Boards2(SimSession):
    """Context manager: a namespace with the tap, and the two boards running (soc/sim.py
    SimSession: `lines`, wait_for, ns_run). Console lines are "M: ..." and "S: ..." (the boards)
    and "X: ..." (the switch); the testbench's "T ..." samples go to `samples` as (cycle, master
    ns, slave ns)."""

    def __init__(self, run_dir, netns="ethdaq-boards2", tap="ethdaq2", host_ip=HOST_IP, s_ppm=0.0,
                 sample_cycles=0, log=None, echo=False):
        super().__init__(run_dir, netns=netns, echo=echo, log=log,
                         command=[str(Path(run_dir).resolve() / "obj" / "Vtop"), f"tap={tap}",
                                  f"sample={sample_cycles}", "m_osc=0", f"s_osc={ptp2.osc_error(s_ppm)}"])
        self.tap, self.host_ip = tap, host_ip
        self.samples = []

    def _take(self, line):
        if not line.startswith("T "):
            return False
        _, k, tm, ts = line.split()
        self.samples.append((int(k), int(tm), int(ts)))
        return True

    def _started(self):
        self.wait_for("X: switch up", timeout=60)
        self.ns_run(["ip", "addr", "add", f"{self.host_ip}/24", "dev", self.tap], check=True)
        self.ns_run(["ip", "link", "set", self.tap, "up"], check=True)


SLAVE_STATUS = re.compile(r"^S: ptp: SLAVE \w+ offset=(-?\d+) delay=(-?\d+)")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--output-dir", default=str(REPO / "build" / "boards2"))
    p.add_argument("--ppm", type=float, default=50.0, help="the slave's oscillator error (default 50)")
    p.add_argument("--timeout", type=float, default=900, help="wall seconds to wait for the slave's lock")
    p.add_argument("--echo", action="store_true", help="print the consoles")
    args = p.parse_args(argv)
    print("building both boards ...", flush=True)
    run_dir = build(args.output_dir)
    t0 = time.monotonic()
    with Boards2(run_dir, s_ppm=args.ppm, sample_cycles=125000, echo=args.echo) as b:
        b.wait_for("M: ethdaq ready", timeout=300)
        b.wait_for("S: ethdaq ready", timeout=300)
        print(f"both boards ready after {time.monotonic() - t0:.0f} s", flush=True)
        for name, (_, ip, _) in BOARDS.items():
            r = b.ns_run(["ping", "-c", "3", "-W", "10", ip], capture_output=True, text=True)
            print(f"ping {name} {ip}: {r.stdout.strip().splitlines()[-2] if r.stdout.strip() else r.stderr}")
        line = b.wait_for(SLAVE_STATUS, timeout=args.timeout)
        print(f"slave locked after {time.monotonic() - t0:.0f} s: {line}")
        time.sleep(5)
        offsets = [ts - tm for _, tm, ts in b.samples[-20:]]
        print(f"true offsets (slave - master, ns), last {len(offsets)} samples: {offsets}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
