#!/usr/bin/env python3
#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Line rate and latency of the DAQ streamer at the GMII (1G) and XGMII (10G) pins,
cycle-accurate (Verilator).

Prints: link, UDP payload bytes, measured MiB/s of UDP payload, % of the theoretical
payload/(payload+66) x 125 MB/s (1G) or x 1.25 GB/s (10G), inter-frame gaps seen (bytes; at 10G
from the end of the FCS to the start character), and the latency from "datagram complete at the
streamer input" to its first preamble byte on the wire (at 10G the /S/ character that replaces
it), in cycles and ns (125 MHz at 1G, 156.25 MHz at 10G; x.5 cycles: /S/ in lane 4).
10G: the streamer through our XGMII transmitter (gateware/xgmiitx.py), the transmit side in its
own clock domain so datagrams cross from the detector clock; 10G-L: through LiteEth's CRC and
preamble inserters and XGMII TX, one clock domain.
Simulated figures, not measured on hardware.

    .venv/bin/python bench/linerate.py [--frames N]
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import gmii, xgmii  # noqa: E402

CLK_HZ = 125e6
CYCLE_10G_NS = 6.4  # 156.25 MHz XGMII clock.


def theoretical_mib_s(payload):
    return payload/(payload + 66)*CLK_HZ/2**20


def throughput(exe, payload, frames):
    r = gmii.measure(exe, payload, frames=frames, enable=0b1111, rate=2**32 - 1)
    starts = r["starts"][1:]  # [0] is the ARP request.
    cycles = starts[-1] - starts[0]
    mib_s = (len(starts) - 1)*payload/cycles*CLK_HZ/2**20
    return mib_s, sorted(set(r["gaps"][1:])), r


def latency(exe, payload):
    """One channel at a third of the link, so the link is idle whenever a datagram completes."""
    samples = (payload - 40)//2
    rate = int(2**32*samples/((payload + 66)*3))
    r = gmii.measure(exe, payload, frames=6, enable=0b1, rate=rate)
    lat = [s - c for s, c in zip(r["starts"][1:], r["closes"])][1:]  # [0] waits for ARP.
    return min(lat), max(lat)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=40, help="frames per throughput point (default 40)")
    parser.add_argument("--build-dir", default=str(Path(__file__).resolve().parents[1] / "build" / "bench"))
    parser.add_argument("--stages", action="store_true",
                        help="where the 1G latency goes: each stage's first valid cycle (Migen simulation)")
    args = parser.parse_args(argv)
    if args.stages:
        print("stage                                    cycles after the datagram closes")
        for name, cycles in gmii.stage_cycles():
            print(f"{name:<40} {cycles:>3}")
        return 0
    exe = gmii.build_verilator(args.build_dir)
    print("link  payload  MiB/s (sim)  theory MiB/s  % of theory  IFG bytes  latency cycles  latency ns")
    for payload in (64, 256, 1024, 1472, 8972):
        mib_s, gaps, _ = throughput(exe, payload, args.frames)
        lo, hi = latency(exe, payload)
        lat_ns = f"{lo*8}" if lo == hi else f"{lo*8}-{hi*8}"
        print(f"1G    {payload:>7}  {mib_s:>11.3f}  {theoretical_mib_s(payload):>12.3f}  "
              f"{100*mib_s/theoretical_mib_s(payload):>10.3f}%  {','.join(map(str, gaps)):>9}  "
              f"{lo if lo == hi else f'{lo}-{hi}':>14}  {lat_ns:>10}")
    for link, mac in (("10G", "streamer-ethdaq"), ("10G-L", "streamer")):
        exe10 = xgmii.build_verilator(Path(args.build_dir).parent / mac, mac=mac)
        for payload in (64, 128, 256, 512, 1024, 1472, 8972):
            # An odd frame count: from the third /S/ to the last, an even count of gaps (the
            # deficit idle count alternates two gap lengths at these sizes).
            r = xgmii.measure(exe10, payload + 42, frames=max(9, min(args.frames, 40)) | 1, skip=2)
            lo, hi = xgmii.latency(exe10, payload)
            cycles = f"{lo:g}" if lo == hi else f"{lo:g}-{hi:g}"
            lat_ns = f"{lo*CYCLE_10G_NS:.1f}" if lo == hi else f"{lo*CYCLE_10G_NS:.1f}-{hi*CYCLE_10G_NS:.1f}"
            print(f"{link:<5} {payload:>7}  {r['payload_mib_s']:>11.3f}  {r['theory_mib_s']:>12.3f}  "
                  f"{r['pct']:>10.3f}%  {','.join(map(str, r['ifgs'])):>9}  {cycles:>14}  {lat_ns:>10}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
