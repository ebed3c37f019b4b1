#!/usr/bin/env python3
#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Robustness benches (docs/robustness.md) on the simulated board: hostile traffic at the PHY
pins while it streams, and a long soak under a ping flood and control traffic. Everything here is
simulated: the whole SoC in Verilator (firmware on the VexRiscv, GMII pins with preamble, FCS and
gaps) on a tap in a network namespace this bench creates and removes; Linux receives the stream.

    sudo .venv/bin/python bench/robustness.py hostile [--frames 100000] [--batch 1000] [--markdown]
    sudo .venv/bin/python bench/robustness.py soak [--packets 1000000] [--payload 64] [--markdown]
    sudo .venv/bin/python bench/robustness.py flood [--seconds 10] [--rate 0.001] [--markdown]

hostile: bench/hostile.py's frames of every kind (each labelled there with the cause a correct
board counts it under), shuffled, put on the receive pins by the PHY's injector
(gateware/simphy.py) in batches, while the board streams 4 channels below line rate. Printed: per
cause, frames injected and the board's count of them (RX_STATS, docs/protocol.md), and the
stream: datagrams, missing, out of order, dropped on the board; then ARP and ping after it.

soak: the board streams `--packets` DAQ datagrams (4 channels, below line rate) to a receiver in
the namespace, which checks every sample (consecutive counter values), while Linux floods it with
pings (`ping -f`) and a control client asks STATUS in a loop. Printed: datagrams, lost, out of
sequence, duplicates, malformed, dropped on the board, the pings and control requests answered,
rates in simulated and wall time, and the receive counters.

flood: Linux floods the board with pings through a raw socket (0 and 1472 payload bytes, as fast
as Python sends them, far beyond what the wire carries) while it streams. Printed: frames sent,
dropped by the kernel's queue for the tap (where `ip -s link` counts them) and handed to the
simulation, the board's receive counters, the stream, and ping after.

test/system/test_network.py runs all three, shorter, in CI (the same functions).
"""

import argparse
import collections
import json
import os
import random
import signal
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.table import print_table  # noqa: E402

NETNS, TAP = "ethdaq-robust", "ethdaqrb0"
BOARD_IP, HOST_IP = "192.168.1.50", "192.168.1.100"
CTL_PORT, DATA_PORT = 7000, 5000
BACKGROUND = ("rx_ok", "icmp_type")   # Audit counters Linux's own traffic adds to (hostile bench).

# Runs in the namespace: a stream checked sample by sample until `stop` exists (or `packets`
# datagrams came), with a ping flood and a STATUS loop beside it when asked. One JSON line out.
STREAM = r"""
import json, os, subprocess, sys, threading, time
from ethdaq.host.ctl import ControlClient
from ethdaq.host.receiver import Receiver
from ethdaq.wire import daqformat

board, ctl_port, data_port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rate, payload, packets, stop, flood = float(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), sys.argv[7], sys.argv[8] == "1"
problems, last = [], {}

def check(h, data):
    n = h.sample_bits // 8
    s = [int.from_bytes(data[i*n:(i+1)*n], "big") for i in range(h.sample_count)]
    if s and s != [(s[0] + i) % 65536 for i in range(len(s))]:
        problems.append(f"stream {h.stream_id} seq {h.seq}: samples not consecutive")
    prev = last.get(h.stream_id)
    if prev is not None and s and (s[0] - prev - 1) % 65536 != 0 and not h.dropped:
        problems.append(f"stream {h.stream_id} seq {h.seq}: a gap in the samples with nothing reported dropped")
    if s:
        last[h.stream_id] = s[-1]

ctl_stats = {"sent": 0, "answered": 0, "failed": 0}
done = threading.Event()

def control_loop():
    with ControlClient(board, ctl_port, timeout=5.0) as c:
        while not done.is_set():
            ctl_stats["sent"] += 1
            try:
                c.status()
                ctl_stats["answered"] += 1
            except Exception as e:
                ctl_stats["failed"] += 1
            time.sleep(0.01)

with Receiver(port=data_port) as rx, ControlClient(board, ctl_port, timeout=5.0) as ctl:
    ctl.emulator("counter", min(int(rate * 2**32), 2**32 - 1))
    ping = None
    threads = []
    if flood:
        ping = subprocess.Popen(["ping", "-f", "-q", "-s", "56", board], stdout=subprocess.PIPE, text=True)
        threads = [threading.Thread(target=control_loop)]
        for t in threads:
            t.start()
    t0 = time.monotonic()
    run, dst = ctl.stream_start(dst_port=data_port, payload=payload)
    while not os.path.exists(stop) and rx.stats.datagrams < packets:
        rx.run(duration=0.5, max_datagrams=packets - rx.stats.datagrams, on_datagram=check)
    ctl.stream_stop()
    stats = rx.run(idle_timeout=3, on_datagram=check)
    wall = time.monotonic() - t0
    done.set()
    for t in threads:
        t.join(timeout=30)
    pings = None
    if ping is not None:
        ping.send_signal(2)
        out = ping.communicate(timeout=30)[0]
        line = next((l for l in out.splitlines() if "transmitted" in l), "")
        parts = line.replace(",", "").split()
        pings = {"transmitted": int(parts[0]), "received": int(parts[3])} if len(parts) > 3 else {"raw": out}
    status = ctl.status()
    streams = ctl.streams()
    st = stats.streams.values()
print(json.dumps(dict(run=run, problems=problems[:20], nproblems=len(problems), datagrams=stats.datagrams,
    payload_bytes=stats.payload_bytes, malformed=stats.malformed_total, kernel=stats.kernel_dropped,
    missing=stats.missing, out_of_order=sum(s.out_of_order for s in st), duplicates=sum(s.duplicates for s in st),
    board_dropped=sum(s.board_dropped for s in st), streams=sorted(stats.streams), wall_s=wall,
    board_datagrams=sum(c.datagrams for c in streams.streams), status_dropped=status.dropped,
    pings=pings, control=ctl_stats)))
"""


def rx_stats(session, board_ip=BOARD_IP, ctl_port=CTL_PORT):
    """The board's RX_STATS, {name: value}, asked from the namespace."""
    code = ("import json, sys\nfrom ethdaq.host.ctl import ControlClient\n"
            f"with ControlClient({board_ip!r}, {ctl_port}) as c:\n    print(json.dumps(c.rx_stats()))\n")
    r = session.ns_run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"RX_STATS failed: {r.stderr.strip()[-1000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def start_stream(session, stop, rate, payload, packets, flood, board_ip=BOARD_IP, ctl_port=CTL_PORT,
                 data_port=DATA_PORT):
    import subprocess
    return subprocess.Popen(["ip", "netns", "exec", session.netns, sys.executable, "-c", STREAM, board_ip,
                             str(ctl_port), str(data_port), str(rate), str(payload), str(packets), str(stop),
                             "1" if flood else "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(REPO),
                            start_new_session=True)   # Its ping flood with it: stop_stream().


def stop_stream(proc):
    """Kill a stream process and what it started (a ping flood holds its output pipes open)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def finish_stream(proc, timeout):
    out, err = proc.communicate(timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"the stream failed: {err.strip()[-2000:]}")
    return json.loads(out.strip().splitlines()[-1])


# Runs in the namespace: ICMP echo requests to the board through an AF_PACKET socket on the tap, as
# fast as Python sends them, for `seconds` or `count` frames; one JSON line out. Sizes are ICMP
# payload bytes, taken in turn (0: hping3 -1's; 1472: the largest in a 1500-byte MTU). ENOBUFS (a
# full queue in front of the tap) is counted, not fatal: the kernel refused that frame.
FLOOD = r"""
import errno, json, socket, sys, time
from scapy.all import ICMP, IP, Ether, Raw, raw
tap, board_mac, board_ip, host_ip, seconds, count, sizes = sys.argv[1:8]
host_mac = open(f"/sys/class/net/{tap}/address").read().strip()
frames = [raw(Ether(src=host_mac, dst=board_mac) / IP(src=host_ip, dst=board_ip) /
              ICMP(type=8, id=0x4646, seq=i) / Raw(bytes(int(n)))) for i, n in enumerate(sizes.split(","))]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((tap, 0))
sent = refused = 0
t0 = time.monotonic()
end, count = t0 + float(seconds), int(count)
while sent + refused < count and time.monotonic() < end:
    for f in frames:
        try:
            s.send(f)
            sent += 1
        except OSError as e:
            if e.errno != errno.ENOBUFS:
                raise
            refused += 1
print(json.dumps(dict(sent=sent, refused=refused, wall_s=time.monotonic() - t0)))
"""


def flood(session, tap, board_mac, board_ip, host_ip, seconds=4.0, count=10**7, sizes=(0, 1472)):
    """ICMP echo requests from Linux to the board at full speed (FLOOD) for `seconds` or `count`
    frames. Returns the sender's counts: sent, refused (ENOBUFS) and wall_s."""
    import subprocess
    r = subprocess.run(["ip", "netns", "exec", session.netns, sys.executable, "-c", FLOOD, tap, board_mac,
                        board_ip, host_ip, str(seconds), str(count), ",".join(map(str, sizes))],
                       capture_output=True, text=True, cwd=str(REPO), timeout=seconds + 120)
    if r.returncode != 0:
        raise RuntimeError(f"the flood failed: {r.stderr.strip()[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def tap_counters(session, tap):
    """The kernel's transmit counters of the tap (Linux's side: what it sent to the board), as `ip
    -s link` shows them: packets the simulation read, and dropped, those the kernel's queue for
    the tap had no room for."""
    import subprocess
    r = subprocess.run(["ip", "netns", "exec", session.netns, "ip", "-s", "-j", "link", "show", tap],
                       capture_output=True, text=True, check=True)
    tx = json.loads(r.stdout)[0]["stats64"]["tx"]
    return {"packets": tx["packets"], "dropped": tx["dropped"]}


def host_flood(session, gateware_dir, tap, board_mac, board_ip=BOARD_IP, host_ip=HOST_IP, ctl_port=CTL_PORT,
               seconds=4.0, count=2_000_000, rate=0.001, payload=1472):
    """A flood from Linux (`flood()`) while the board streams (4 channels at `rate` samples per
    cycle each), then a ping once the kernel's queue has crossed the wire. Returns the sender's
    counts, the changes of the tap's kernel counters and of the board's RX_STATS, the ping's
    output and whether the simulation still runs, and the stream's result."""
    import subprocess
    stop = Path(gateware_dir) / "flood.stop"
    stop.unlink(missing_ok=True)
    before, tap_before = rx_stats(session, board_ip, ctl_port), tap_counters(session, tap)
    proc = start_stream(session, stop, rate, payload, 10**9, flood=False, board_ip=board_ip, ctl_port=ctl_port)
    try:
        time.sleep(2)
        sent = flood(session, tap, board_mac, board_ip, host_ip, seconds, count)
        ping = subprocess.run(["ip", "netns", "exec", session.netns, "ping", "-c", "3", "-i", "0.2", "-W", "10",
                               board_ip], capture_output=True, text=True, timeout=120).stdout
        running = session.proc.poll() is None
    finally:
        stop.touch()
    try:
        result = finish_stream(proc, timeout=300) if running else None
    finally:
        if proc.poll() is None:
            proc.kill()
        stop.unlink(missing_ok=True)
    if not running:
        return dict(flood=sent, ping=ping, running=False)
    tap_after = tap_counters(session, tap)
    after = rx_stats(session, board_ip, ctl_port)
    return dict(flood=sent, ping=ping, running=session.proc.poll() is None, stream=result,
                tap={k: tap_after[k] - tap_before[k] for k in tap_after},
                rx={k: after[k] - before.get(k, 0) for k in after})


def hostile(session, gateware_dir, net, frames, batch=1000, seed=1, rate=0.02, payload=1472, log=print):
    """`frames` of bench/hostile.py's mix (every kind, shuffled) injected at the pins in batches
    while the board streams. Returns (expected counts by cause, the board's RX_STATS deltas, the
    stream's result)."""
    from bench.hostile import KINDS, labelled
    from ethdaq.gateware import simphy
    rng = random.Random(seed)
    stop = Path(gateware_dir) / "robustness.stop"
    stop.unlink(missing_ok=True)
    before = rx_stats(session, net.board_ip, net.ctl_port)
    proc = start_stream(session, stop, rate, payload, 10**9, flood=False, board_ip=net.board_ip, ctl_port=net.ctl_port)
    expected = collections.Counter()
    sent = 0
    try:
        time.sleep(2)
        pending = []
        while sent < frames:
            while len(pending) < batch:
                # A round: every kind's frames, with fresh random contents each time.
                mix = [(f, c) for kind in KINDS
                       for f, c in labelled(kind, net, rng, 1 if kind == "jumbo" else 4) if c is not None]
                rng.shuffle(mix)
                pending += mix
            # At most `batch` frames, and what the injector takes in one file.
            take, size = 0, 0
            while take < min(batch, frames - sent) and size + len(pending[take]) + 8 <= simphy.INJECT_MAX_BYTES:
                size += len(pending[take]) + 8
                take += 1
            todo, pending = pending[:take], pending[take:]
            simphy.inject(gateware_dir, [simphy.wire_frame(f) for f, _ in todo], timeout=600)
            expected.update(c for _, c in todo)
            sent += len(todo)
            log(f"  {sent} frames injected")
    finally:
        stop.touch()
    result = finish_stream(proc, timeout=600)
    stop.unlink(missing_ok=True)
    after = rx_stats(session, net.board_ip, net.ctl_port)
    return expected, {k: after[k] - before.get(k, 0) for k in after}, result


def soak(session, packets, payload=64, rate=0.016, board_ip=BOARD_IP, ctl_port=CTL_PORT, gateware_dir=None,
         timeout=None):
    """`packets` DAQ datagrams with a ping flood and a STATUS loop beside them. Returns the
    stream's result and the board's RX_STATS deltas; subprocess.TimeoutExpired after `timeout`
    seconds (None: no limit) without all of them."""
    stop = Path(gateware_dir or "/nonexistent") / "robustness.never"
    before = rx_stats(session, board_ip, ctl_port)
    proc = start_stream(session, stop, rate, payload, packets, flood=True, board_ip=board_ip, ctl_port=ctl_port)
    try:
        result = finish_stream(proc, timeout=timeout)
    finally:
        stop_stream(proc)
    after = rx_stats(session, board_ip, ctl_port)
    return result, {k: after[k] - before.get(k, 0) for k in after}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="bench", required=True)
    h = sub.add_parser("hostile", help="hostile frames at the pins during a stream")
    h.add_argument("--frames", type=int, default=100_000)
    h.add_argument("--batch", type=int, default=1000, help="frames per injection file, at most (default 1000)")
    h.add_argument("--seed", type=int, default=1)
    h.add_argument("--rate", type=float, default=0.02,
                   help="emulator samples per cycle per channel (default 0.02: 16 %% of the line; 0.1: 80 %%)")
    s = sub.add_parser("soak", help="a long stream under a ping flood and control traffic")
    s.add_argument("--packets", type=int, default=1_000_000)
    s.add_argument("--payload", type=int, default=64, help="UDP payload bytes per datagram (default 64)")
    s.add_argument("--rate", type=float, default=0.016,
                   help="emulator samples per cycle per channel (default 0.016: 70 %% of the line at 64 bytes)")
    f = sub.add_parser("flood", help="a flood from Linux faster than the wire while the board streams")
    f.add_argument("--seconds", type=float, default=10.0, help="wall seconds of flood (default 10)")
    f.add_argument("--rate", type=float, default=0.001,
                   help="emulator samples per cycle per channel (default 0.001: 0.8 %% of the line)")
    for q in (h, s, f):
        q.add_argument("--output-dir", default=str(REPO / "build" / "bench-robustness"))
        q.add_argument("--markdown", action="store_true")
    args = p.parse_args(argv)
    from bench.hostile import Network
    from ethdaq.boards import get_board
    from ethdaq.soc import build, sim
    from ethdaq.soc.socconfig import DEFAULT_MAC, SoCConfig
    from ethdaq.wire import protocol
    board = get_board("sim")
    sim.check_can_run(NETNS)
    log = Path(args.output_dir) / "build.log"
    print(f"building the simulated board (log: {log}) ...", flush=True)
    with build.output_to(log):
        result = build.build_sim(board, args.output_dir, SoCConfig(ip_address=BOARD_IP), tap=TAP, host_ip=HOST_IP)
    gateware = Path(result.artifact).parent.parent
    with sim.SimSession(gateware, netns=NETNS, echo=False, log=Path(args.output_dir) / "console.log") as session:
        session.wait_for("ethdaq ready", timeout=180)
        session.ns_run(["sysctl", "-q", "-w", f"net.ipv6.conf.{TAP}.disable_ipv6=1"], check=True)
        t0 = time.monotonic()
        if args.bench == "hostile":
            import subprocess
            mac = subprocess.run(["ip", "netns", "exec", NETNS, "cat", f"/sys/class/net/{TAP}/address"],
                                 capture_output=True, text=True, check=True).stdout.strip()
            net = Network(board_mac=DEFAULT_MAC, board_ip=BOARD_IP, host_mac=mac, host_ip=HOST_IP, ctl_port=CTL_PORT)
            expected, delta, res = hostile(session, gateware, net, args.frames, args.batch, args.seed, args.rate)
            wall = time.monotonic() - t0
            rows = []
            for code, name, desc in protocol.RX_COUNTERS:
                if name not in delta:
                    continue
                if code >= 0x20:   # Not the audit's: bench/hostile.py labels frames with the audit's causes.
                    rows.append([name, "-", str(delta[name]), "-", desc])
                    continue
                want, got = expected.get(name, 0), delta[name]
                # Linux adds good frames (the stream's requests, ARP) and ICMP errors of its own
                # (port unreachable for the board's answers to injected requests from ports it
                # does not have open).
                ok = got >= want if name in BACKGROUND else got == want
                rows.append([name, str(want), str(got), ("yes" if ok else "NO") + (" (at least)" if name in BACKGROUND else ""),
                             desc])
            print(f"\nHostile frames at the pins during a stream: {args.frames} frames, seed {args.seed}, "
                  f"stream at {args.rate:g} samples per cycle per channel (simulated; `sudo .venv/bin/python "
                  f"bench/robustness.py hostile --frames {args.frames} --rate {args.rate:g}`), "
                  f"{wall:.0f} s wall\n")
            print_table(["counter", "injected", "counted", "exact", "what"], rows, args.markdown)
            print("\nrx_ok and icmp_type also count Linux's own frames: the stream's control requests and ARP; "
                  "its port-unreachable answers to the board's replies to injected requests. The counters from "
                  "0x20 on are not the audit's (docs/protocol.md): no frame is labelled with them.")
            bad_counts = any(r[3].startswith("NO") for r in rows)
        elif args.bench == "flood":
            out = host_flood(session, gateware, TAP, DEFAULT_MAC, seconds=args.seconds, count=10**9, rate=args.rate)
            if not out["running"]:
                print("\nThe simulation stopped during the flood: see", Path(args.output_dir) / "console.log")
                return 1
            res = out["stream"]
            print(f"\nFlood from Linux: ICMP echo requests of 0 and 1472 payload bytes through a raw socket for "
                  f"{args.seconds:g} s while the board streams (simulated; `sudo .venv/bin/python bench/robustness.py "
                  f"flood --seconds {args.seconds:g}`)\n")
            print_table(["frames", "value"], [
                ["sent by Linux's raw socket", str(out["flood"]["sent"])],
                ["refused by the socket (ENOBUFS)", str(out["flood"]["refused"])],
                [f"dropped by the kernel's queue for the tap (`ip -s link show {TAP}`: TX dropped)",
                 str(out["tap"]["dropped"])],
                ["handed to the simulation (TX packets; with the stream's control and ARP)",
                 str(out["tap"]["packets"])],
                ["pings answered after the flood (of 3)", str(out["ping"].count("bytes from"))],
            ] + [[f"board: {name} (RX_STATS)", str(v)] for name, v in out["rx"].items() if v], args.markdown)
        else:
            res, delta = soak(session, args.packets, args.payload, args.rate, gateware_dir=gateware)
            wall = time.monotonic() - t0
            print(f"\nSoak: {args.packets} datagrams of {args.payload} bytes, 4 channels, ping flood and a STATUS "
                  f"loop (simulated; `sudo .venv/bin/python bench/robustness.py soak --packets {args.packets}`), "
                  f"{wall:.0f} s wall\n")
            rows = [[name, str(v)] for name, v in delta.items() if v]
            print_table(["receive counter (RX_STATS, change)", "value"], rows, args.markdown)
        ctl = res.get("control", {})
        pings = res.get("pings") or {}
        print()
        print_table(["stream", "value"], [
            ["datagrams received", str(res["datagrams"])],
            ["datagrams the board sent", str(res["board_datagrams"])],
            ["missing (lost)", str(res["missing"])],
            ["out of sequence", str(res["out_of_order"])],
            ["duplicates", str(res["duplicates"])],
            ["malformed", str(res["malformed"])],
            ["samples dropped on the board", str(res["board_dropped"])],
            ["sample checks failed", str(res["nproblems"])],
            ["kernel drops", str(res["kernel"])],
            ["wall time of the stream, s", f"{res['wall_s']:.1f}"],
            ["datagrams per wall second", f"{res['datagrams'] / res['wall_s']:.0f}"],
            ["pings answered / sent", f"{pings.get('received', '-')} / {pings.get('transmitted', '-')}"],
            ["STATUS answered / sent", f"{ctl.get('answered', '-')} / {ctl.get('sent', '-')}"],
        ], args.markdown)
        r = session.ns_run(["ping", "-c", "3", "-i", "0.2", "-W", "5", BOARD_IP], capture_output=True, text=True)
        print(f"\nping after: {'answered' if r.returncode == 0 else 'NOT answered'}")
        bad = (args.bench == "hostile" and bad_counts) or res["missing"] or res["out_of_order"] or res["malformed"] or res["nproblems"] or res["board_dropped"]
    return 1 if bad or r.returncode != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
