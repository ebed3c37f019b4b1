#!/usr/bin/env python3
#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Receive and transmit latencies per path and packet size, laid out like Table I of the seed paper
on Ethernet latency on a Zynq with lwIP (shared/seeds/000: "Hardware/software factors influencing
Ethernet latency"), from the simulated board's own hardware latency probes (gateware/probe.py,
read through the control protocol's PROBE), beside the paper's figures; then the time-triggered
launch error with and without bulk load.

Everything here is simulated: the whole SoC in Verilator (firmware running on the VexRiscv, GMII
pins modelled with preamble, FCS and inter-frame gap) on a tap in a network namespace this bench
creates and removes; Linux sends and receives the datagrams. Mean and 3 sigma come from the
probe's count, sum and sum of squares, exactly, over every frame.

    sudo .venv/bin/python bench/latency.py [--frames 50] [--markdown]

Paths (docs/realtime.md has where each starts and ends):
- receive, from the frame's last byte (FCS) on the pins to
    fast-track: the payload at the classifier's hardware sink (UDP to the fast-track port);
    hardware UDP: the datagram's header at LiteEth's UDP port (the control mailbox);
    CPU: the firmware's first look at it (its main loop polls the mailbox);
- transmit, from the datagram offered to the first preamble byte on the pins:
    hardware UDP: a DAQ datagram offered by the streamer (canned-header framer);
    CPU: a control answer offered by the mailbox to LiteEth's UDP port.

The paper's sizes are whole frames without preamble and FCS; ours are UDP payloads (42 bytes
more on the wire). Our paths are cut-through after the frame gate (receive) and from the offer
(transmit): their latencies do not grow with the size, which the table shows.
"""

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.table import print_table  # noqa: E402

NETNS, TAP = "ethdaq-latency", "ethdaqlt0"
BOARD_IP, HOST_IP = "192.168.1.50", "192.168.1.100"
CTL_PORT, FASTTRACK_PORT, DATA_PORT = 7000, 9000, 5000
SIZES = (64, 256, 1024)

# Seed paper, Table I, Ethernet Lite MAC with direct memory access ("EL, DM", its fastest), in us:
# (mean, 3 sigma) per size; the fast-track figures from its text and Fig. 9 (no sigma given).
PAPER = {
    "rx_fasttrack": {64: (1.51, None), 256: (2.85, None), 1024: (7.74, None)},
    "rx_pbuf":      {64: (1.75, 0.17), 256: (2.70, 0.18), 1024: (5.44, 0.19)},
    "rx_udp":       {64: (2.95, 0.20), 256: (4.13, 0.21), 1024: (7.74, 0.20)},
    "tx_pbuf":      {64: (1.52, 0.05), 256: (2.48, 0.05), 1024: (6.23, 0.05)},
    "tx_udp":       {64: (2.10, 0.07), 256: (3.31, 0.07), 1024: (7.92, 0.08)},
}

# Our class, what it measures, the paper's row beside it and what that row measures.
ROWS = [
    ("Rx", "fast-track (hardware sink)", "rx_fasttrack", "rx_fasttrack",
     "hardware packet identifier, payload to the application"),
    ("Rx", "hardware UDP port", "rx_udp", "rx_pbuf", "to the packet in a PBUF (\"Rx PBUF\")"),
    ("Rx", "CPU (firmware sees it)", "rx_cpu", "rx_udp", "to the UDP receive callback (\"Rx UDP\")"),
    ("Tx", "hardware UDP (DAQ datagram)", "tx_bulk", "tx_udp", "UDP_sendto() to the MAC sending (\"Tx UDP\")"),
    ("Tx", "CPU (control answer)", "tx_cpu", "tx_pbuf", "copy from the PBUF to the MAC sending (\"Tx PBUF\")"),
]

# Runs inside the namespace: every measurement through the control protocol and Linux sockets.
INSIDE = r"""
import json, socket, sys, time
from ethdaq.host.ctl import ControlClient
from ethdaq.host.receiver import Receiver
from ethdaq.wire import protocol

board, ctl_port, ft_port, data_port, frames = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
sizes = [int(s) for s in sys.argv[6].split(",")]
out = {}

def classes(report):
    return {n: dict(count=c.count, sum=c.sum, sumsq=c.sumsq, min=c.min, max=c.max) for n, c in report.classes.items()}

def minus(a, b):
    # a - b, class by class: what happened between two reads.
    return {n: {k: a[n][k] - b[n][k] for k in ("count", "sum", "sumsq")} for n in a}

with ControlClient(board, ctl_port, timeout=10.0) as ctl:
    ctl.identify()                                # The board learns this host's MAC (ARP).
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for size in sizes:
        # Receive: datagrams of `size` payload bytes to the fast-track port, then to the control
        # port.
        for key, port in (("rx_fasttrack", ft_port), ("rx_mailbox", ctl_port)):
            ctl.probe_clear()
            for i in range(frames):
                if port == ctl_port:
                    # A request header padded to `size`: the firmware answers "bad length", and the
                    # next goes only then, one datagram at a time as in the paper (the firmware
                    # copies a datagram in over CSRs, a byte at a time: back to back they queue).
                    s.settimeout(10)
                    s.sendto(protocol.pack_header(protocol.MSG_IDENTIFY, 60000 + i).ljust(size, b"\0"), (board, port))
                    s.recvfrom(2048)
                else:
                    s.sendto(bytes([i & 0xff]) * size, (board, port))
                time.sleep(0.02)
            time.sleep(0.5)
            r1 = classes(ctl.probe())
            # The read's own request is counted at the mailbox too: a second read right after
            # says how much one such request adds, and that is taken off (docs/realtime.md).
            r2 = classes(ctl.probe())
            out[f"{key}_{size}"] = {"first": r1, "read": minus(r2, r1)}
        # Transmit, hardware UDP: one stream, datagrams of `size` bytes at a low rate (each one
        # alone on the line, as the paper's single packets).
        ctl.emulator("counter", int(0.001 * 2**32))
        ctl.probe_clear()
        with Receiver(port=data_port) as rx:
            ctl.stream_start(dst_port=data_port, payload=size, enable=0x1)
            stats = rx.run(max_datagrams=frames, idle_timeout=60)
            ctl.stream_stop()
            rx.run(idle_timeout=2)
        out[f"tx_bulk_{size}"] = {"first": classes(ctl.probe()), "received": stats.datagrams}
        ctl.emulator("off", 0)
    out["port_rx_dropped"] = ctl.status().port_rx_dropped
print(json.dumps(out))
"""


def stats_us(c, cycle_ns):
    """(frames, mean us, 3 sigma us, min us, max us) from a class's count, sum, sum of squares."""
    n = c["count"]
    if n <= 0:
        return None
    mean = c["sum"] / n
    var = max(c["sumsq"] / n - mean * mean, 0.0)
    return n, mean * cycle_ns / 1e3, 3 * var**0.5 * cycle_ns / 1e3


def corrected(entry, name):
    """A class's sums, less the read request's own share (mailbox classes), as stats_us takes."""
    c = dict(entry["first"][name])
    if "read" in entry and name in entry["read"]:
        for k in ("count", "sum", "sumsq"):
            c[k] -= entry["read"][name][k]
    return c


def _ratio(r):
    return f"{r:.0f}x" if r >= 10 else f"{r:.2g}x"


def table(res, cycle_ns=8.0):
    """The rows of the table from the inside measurement's JSON."""
    rows = []
    for direction, path, ours, paper, what in ROWS:
        for size in SIZES:
            if ours == "rx_fasttrack":
                c = corrected(res[f"rx_fasttrack_{size}"], ours)
            elif ours in ("rx_udp", "rx_cpu"):
                c = corrected(res[f"rx_mailbox_{size}"], ours)
            elif ours == "tx_bulk":
                c = corrected(res[f"tx_bulk_{size}"], ours)
            else:
                # Every control answer of the run (each phase's first read: since its clear).
                c = None
                if size == SIZES[0]:
                    c = {k: sum(e["first"][ours][k] for e in res.values() if isinstance(e, dict) and "first" in e)
                         for k in ("count", "sum", "sumsq")}
            st = stats_us(c, cycle_ns) if c else None
            pm, ps = PAPER[paper][size]
            ourcells = [f"{st[0]}", f"{st[1]:.3f}", f"{st[2]:.3f}"] if st else ["-", "-", "-"]
            rows.append([direction, path, f"{size} B", *ourcells, f"{pm:.2f}",
                         f"{ps:.2f}" if ps is not None else "-",
                         _ratio(pm / st[1]) if st and st[1] > 0 else "-", what])
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--frames", type=int, default=50, help="frames per path and size (default 50)")
    p.add_argument("--launches", type=int, default=4, help="launches per row of the launch-error table (default 4)")
    p.add_argument("--output-dir", default=str(REPO / "build" / "bench-latency"))
    p.add_argument("--markdown", action="store_true")
    p.add_argument("--json", action="store_true", help="print the probe readings as JSON too")
    args = p.parse_args(argv)
    from ethdaq.boards import get_board
    from ethdaq.soc import build, sim
    from ethdaq.soc.socconfig import SoCConfig
    board = get_board("sim")
    sim.check_can_run(NETNS)
    log = Path(args.output_dir) / "build.log"
    print(f"building the simulated board with the latency probes (log: {log}) ...", flush=True)
    with build.output_to(log):
        result = build.build_sim(board, args.output_dir, SoCConfig(ip_address=BOARD_IP, with_probes=True,
                                 fasttrack_ports=(FASTTRACK_PORT,)), tap=TAP, host_ip=HOST_IP)
    gateware = Path(result.artifact).parent.parent
    with sim.SimSession(gateware, netns=NETNS, echo=False, log=Path(args.output_dir) / "console.log") as s:
        s.wait_for("ethdaq ready", timeout=180)
        r = s.ns_run([sys.executable, "-c", INSIDE, BOARD_IP, str(CTL_PORT), str(FASTTRACK_PORT), str(DATA_PORT),
                      str(args.frames), ",".join(map(str, SIZES))],
                     capture_output=True, text=True, timeout=600 + 60 * args.frames)
        if r.returncode != 0:
            raise RuntimeError(f"measurement failed: {r.stderr.strip()[-2000:]}")
        res = json.loads(r.stdout.strip().splitlines()[-1])
    cycle_ns = 1e9 / board.sys_clk_freq
    print(f"\nLatency per path and size, {args.frames} frames each (simulated: Verilator, firmware on the "
          f"VexRiscv, {cycle_ns:g} ns cycles; `sudo .venv/bin/python bench/latency.py --frames {args.frames}`), "
          f"beside the seed paper's Table I (Zynq, lwIP, Ethernet Lite MAC with direct memory access; "
          f"hardware, its sizes are whole frames)\n")
    print_table(["dir", "our path", "size", "frames", "mean us", "3 sigma us", "paper mean us", "paper 3 sigma us",
                 "paper / ours", "the paper's row measures"], table(res, cycle_ns), args.markdown)
    print(f"\nTx CPU: the control answers of the whole run (sizes 8 to 557 bytes), in the 64 B row. "
          f"Datagrams the control mailbox had no room for: {res['port_rx_dropped']}.")

    # Time-triggered launches: the launch error at the GMII pins, idle and under bulk load (Migen,
    # cycle-accurate: bench/txclasses.py's harness).
    from bench.txclasses import launch_errors
    rows = []
    for payload in (None, 1472):
        errors, counts, _ = launch_errors(payload, launches=args.launches)
        rows.append(["none (idle line)" if payload is None else f"back-to-back {payload}-byte datagrams",
                     f"{counts['sent']}", f"{counts['past'] + counts['busy']}", f"{min(errors)} ns", f"{max(errors)} ns"])
    print(f"\nTime-triggered launch error at the GMII pins, {args.launches} launches each (simulated: Migen)\n")
    print_table(["bulk load", "sent", "missed", "error min", "error max"], rows, args.markdown)
    if args.json:
        print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
