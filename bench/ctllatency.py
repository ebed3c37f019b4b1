#!/usr/bin/env python3
#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Control request-to-reply latency of the simulated board, in simulated clock cycles at its GMII
pins: from the cycle after the request's last byte (its FCS) to the first preamble byte of the
reply, for IDENTIFY and STATUS, beside IPbus's figure (about 250 us per single-word access
through its control hub).

The simulated board is built with a pin probe (DAQSoC with_pin_probe: gateware/verilog/
ethdaq_gmii_probe.v prints "probe: rx-end CYCLE" and "probe: tx-start CYCLE" for UDP frames to
and from the control port); `ethdaq.host.ctl.ControlClient` sends the requests one at a time
from the host side of the tap, in a network namespace this bench creates and deletes. The path
measured: LiteEth's GMII PHY, MAC (FCS check), IP and UDP layers, the CPU's UDP mailbox
(gateware/cpuport.py), the firmware (poll, copy in over CSRs, parse, answer, copy out), and back
down LiteEth's stack to the pins. A first STATUS (not counted) lets the board learn the host's
MAC by ARP.

    sudo .venv/bin/python bench/ctllatency.py [--count 100] [--markdown]
"""

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.table import print_table  # noqa: E402

IPBUS_US = 250.0
NETNS, TAP = "ethdaq-ctllat", "ethdaqlat0"
BOARD_IP, HOST_IP = "192.168.1.50", "192.168.1.100"

_PROBE = re.compile(r"probe: (rx-end|tx-start) (\d+)")

REQUESTS = """
import sys, time
from ethdaq.host.ctl import ControlClient
ip, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with ControlClient(ip, port, timeout=5.0) as c:
    c.status()                      # ARP: the board learns this host's MAC
    time.sleep(0.2)
    print("begin", flush=True)
    for kind in ("identify", "status"):
        for _ in range(count):
            getattr(c, kind)()
            time.sleep(0.02)        # Nothing else of ours in flight between two requests.
print("end", flush=True)
"""


def probe_events(lines):
    """(kind, cycle) of every probe line, in console order."""
    return [(m.group(1), int(m.group(2))) for m in map(_PROBE.search, lines) if m]


def latencies(events):
    """Cycles from each request's end to its reply's start: the events must alternate rx-end,
    tx-start (one request at a time); ValueError otherwise."""
    kinds = [k for k, _ in events]
    if kinds != ["rx-end", "tx-start"] * (len(events) // 2) or len(events) % 2:
        raise ValueError(f"probe events do not alternate request, reply: {kinds[:12]}...")
    return [events[i + 1][1] - events[i][1] for i in range(0, len(events), 2)]


def measure(session, board_ip, ctl_port, count):
    """Send `count` IDENTIFY then `count` STATUS requests through a running SimSession built with
    the pin probe; returns {"identify": [cycles...], "status": [cycles...]}."""
    before = len(session.lines)
    r = session.ns_run([sys.executable, "-c", REQUESTS, board_ip, str(ctl_port), str(count)],
                       capture_output=True, text=True, timeout=60 + 10 * count)
    if r.returncode != 0:
        raise RuntimeError(f"requests failed: {r.stderr.strip()}")
    # The warm-up STATUS's pair comes first. The last reply's probe line may still be on its way.
    deadline = time.monotonic() + 30
    while len(probe_events(session.lines[before:])) < 2 * (2 * count + 1) and time.monotonic() < deadline:
        time.sleep(0.1)
    cycles = latencies(probe_events(session.lines[before:]))[1:]
    if len(cycles) != 2 * count:
        raise RuntimeError(f"expected {2 * count} request/reply pairs at the pins, saw {len(cycles)}")
    return {"identify": cycles[:count], "status": cycles[count:]}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--count", type=int, default=100, help="requests of each kind (default 100)")
    p.add_argument("--output-dir", default=str(REPO / "build" / "ctllatency"))
    p.add_argument("--markdown", action="store_true")
    p.add_argument("--json", action="store_true", help="print the cycle counts as JSON too")
    args = p.parse_args(argv)
    from ethdaq.boards import get_board
    from ethdaq.soc import build, sim
    from ethdaq.soc.socconfig import SoCConfig
    board = get_board("sim")
    sim.check_can_run(NETNS)
    print("building the simulated board with the pin probe ...", flush=True)
    result = build.build_sim(board, args.output_dir, SoCConfig(ip_address=BOARD_IP, with_pin_probe=True),
                             tap=TAP, host_ip=HOST_IP)
    gateware = Path(result.artifact).parent.parent
    with sim.SimSession(gateware, netns=NETNS, echo=False, log=Path(args.output_dir) / "console.log") as s:
        s.wait_for("ethdaq ready", timeout=180)
        res = measure(s, BOARD_IP, 7000, args.count)
    clk = board.sys_clk_freq
    print(f"\nControl request to reply at the simulated board's GMII pins, {args.count} of each, one at a "
          f"time; sys clock {clk / 1e6:g} MHz (simulated; `sudo .venv/bin/python bench/ctllatency.py "
          f"--count {args.count}`)\n")
    rows = []
    for kind, cyc in res.items():
        us = [c / clk * 1e6 for c in cyc]
        rows.append([kind.upper(), f"{min(cyc)}", f"{statistics.mean(cyc):.0f}", f"{max(cyc)}",
                     f"{min(us):.2f}", f"{statistics.mean(us):.2f}", f"{max(us):.2f}",
                     f"{IPBUS_US / statistics.mean(us):.0f}x"])
    print_table(["request", "min cycles", "mean cycles", "max cycles", "min us", "mean us", "max us",
                 f"IPbus {IPBUS_US:g} us / mean"], rows, args.markdown)
    if args.json:
        print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
