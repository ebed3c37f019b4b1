#!/usr/bin/env python3
#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Highest datagram rate the host receive core (ethdaq.host.rxcore.RxCore, as users run it: a
Python loop calling recv()) holds with zero loss, over a veth pair standing in for a NIC, or over
loopback.

A C sender (bench/udpblast.c, built here with gcc into build/bench/) sends valid DAQ datagrams
(one stream, consecutive seq) with sendmmsg, paced at a fixed rate. On loopback the kernel's
whole transmit and receive path up to the receiving socket runs on the sender's CPU, which
then limits the rate long before the receiver does; so by default the sender hands the kernel
up to 64 datagrams per send as one UDP GSO buffer (--gso), which the kernel splits into
separate datagrams before the receiving socket: the receiver sees exactly what it would see
from separate sends (or a NIC). --gso 1 sends one datagram per send. A rate is held when every
datagram sent arrived: none missing by seq, no kernel drops, nothing malformed, and the sender
kept the rate. Per UDP payload size (40-byte DAQ header included): one unpaced run finds the
sender's ceiling; a bisection with --trial-seconds runs brackets the highest held rate; then
--seconds runs step down from it by 10 % until one holds and bisect above that (--full-steps
runs at most): the figure is the highest rate held for --seconds. Then 1,000,000 packets/s and
388,000 packets/s (1 Gb/s line rate at 256 bytes) are run at 256 bytes for --seconds.

--path veth (default): the sender and the receiver are in two network namespaces this bench
creates (and deletes), joined by a veth pair with a 9000-byte MTU. The sender's side splits each
GSO buffer into separate frames (tx-udp-segmentation off), so the receiving veth gets single
frames like a NIC; the receiving side runs the kernel's GRO (gro on, which makes veth use NAPI),
which, like a NIC driver's, merges a burst of frames of one flow into one buffer for a socket
that asked for UDP_GRO. RxCore asks by default (--no-gro: it does not, and reads every
datagram); with it the core splits the merged buffers. --path loopback: the GSO buffers reach
the socket whole with GRO (no frames at all), or split into datagrams without it.

Receiver pinned to --rx-cpu, sender to --tx-cpu. CPU % = CPU time / wall time of the run:
receiver from its thread's CPU clock, sender from getrusage. On loopback and veth the kernel's
receive path (for veth: NAPI, GRO, IP, UDP, queueing to the socket) runs on the sender's CPU, in
its system time, as with a NIC whose interrupts another CPU takes.

The machine may be shared: before each run the bench waits until other processes are quiet,
measures the CPU they used during the run (from /proc), and repeats a run they disturbed
(--max-others); the table shows that "other load" for each figure.

    .venv/bin/python bench/recvrate.py [--path veth|loopback] [--no-gro] [--seconds 10] [--markdown]
    .venv/bin/python bench/recvrate.py --line-rate 10 [--payloads 1472,8972]   # at a 10 Gb/s link's rate

veth needs root (namespaces) and ethtool; the addresses exist only inside the two namespaces.
"""

import argparse
import contextlib
import ctypes
import json
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.ratesearch import highest_held_rate  # noqa: E402
from bench.table import print_table  # noqa: E402
from ethdaq.host.rxcore import DEFAULT_RCVBUF, RxCore  # noqa: E402

MIB = 2**20
LINE_RATE_256 = 388_000   # 1 Gb/s / ((256 + 8 + 20 + 14 + 4 + 8 + 12) bytes * 8) = 388,198
ONE_MILLION   = 1_000_000


CLONE_NEWNET = 0x40000000
VETH_TX_ADDR, VETH_RX_ADDR = "192.0.2.1", "192.0.2.2"  # TEST-NET-1: only inside the namespaces.


def _setns(fd):
    """Move this (single-threaded) process into the network namespace open as fd (os.setns is
    Python 3.12+)."""
    if ctypes.CDLL(None, use_errno=True).setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


@contextlib.contextmanager
def veth_pair(mtu=9000):
    """Two namespaces joined by a veth pair set up as described above; this process enters the
    receiving one for the duration. Yields (sender command prefix, receiver address)."""
    for tool in ("ip", "ethtool"):
        if not any((Path(d) / tool).exists() for d in os.environ.get("PATH", "").split(":") + ["/usr/sbin", "/sbin"]):
            sys.exit(f"error: --path veth needs `{tool}` (Debian: apt-get install {'iproute2' if tool == 'ip' else tool}), "
                     f"or use --path loopback")
    if os.geteuid() != 0:
        sys.exit("error: --path veth needs root (it creates two network namespaces); or use --path loopback")
    tx_ns, rx_ns = f"ethdaq-rr-tx-{os.getpid()}", f"ethdaq-rr-rx-{os.getpid()}"

    def sh(*cmd):
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)

    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    try:
        sh("ip", "netns", "add", tx_ns)
        sh("ip", "netns", "add", rx_ns)
        sh("ip", "link", "add", "rrtx", "netns", tx_ns, "mtu", str(mtu), "type", "veth", "peer", "name", "rrrx",
           "netns", rx_ns, "mtu", str(mtu))
        for ns, dev, addr in ((tx_ns, "rrtx", VETH_TX_ADDR), (rx_ns, "rrrx", VETH_RX_ADDR)):
            sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
        # Frames on the wire, not GSO buffers: segmented before the sending veth.
        sh("ip", "netns", "exec", tx_ns, "ethtool", "-K", "rrtx", "tx-udp-segmentation", "off")
        # NAPI and GRO on the receiving veth. veth only passes locally sent frames of a TSO-capable
        # sender through GRO when the receiver has UDP GRO forwarding or fraglist GRO on
        # (veth_skb_is_eligible_for_gro); forwarding is never used here, nothing is routed.
        sh("ip", "netns", "exec", rx_ns, "ethtool", "-K", "rrrx", "gro", "on", "rx-udp-gro-forwarding", "on")
        fd = os.open(f"/run/netns/{rx_ns}", os.O_RDONLY)
        try:
            _setns(fd)
        finally:
            os.close(fd)
        yield ["ip", "netns", "exec", tx_ns], VETH_RX_ADDR
    finally:
        _setns(home)
        os.close(home)
        for ns in (tx_ns, rx_ns):
            subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)


def build_sender(build_dir):
    exe = Path(build_dir) / "udpblast"
    src = REPO / "bench" / "udpblast.c"
    hdr = REPO / "software" / "host" / "rxcore" / "daq_format.h"
    if not exe.exists() or exe.stat().st_mtime < max(src.stat().st_mtime, hdr.stat().st_mtime):
        exe.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["gcc", "-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", f"-I{hdr.parent}",
                        str(src), "-o", str(exe)], check=True)
    return exe


def gso_segments(payload, gso):
    """Datagrams per GSO send: `gso`, or with 0 as many as fit (at most 64, 65507 bytes)."""
    return gso or max(1, min(64, 65507 // payload))


TICK = os.sysconf("SC_CLK_TCK")


def process_cpu(exclude):
    """{pid: CPU seconds} of every process but `exclude` and the kernel's softirq threads (which
    on loopback do this bench's own receive work)."""
    out = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # Gone meanwhile.
        pid = int(stat.parent.name)
        comm, rest = text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 2:].split()
        if pid in exclude or comm.startswith("ksoftirqd"):
            continue
        out[pid] = (int(rest[11]) + int(rest[12])) / TICK  # utime, stime
    return out


def other_load(before, after):
    """CPU seconds other processes used between two process_cpu() readings (those that started
    in between count whole; those that ended in between are missed)."""
    return sum(t - before.get(pid, 0.0) for pid, t in after.items())


def wait_until_quiet(limit, log_wait, window=2.0, most=0.03):
    """Wait (at most `limit` s) until other processes use under `most` of a CPU over `window` s:
    the machine may be shared, and a zero-loss figure measured beside other load means nothing."""
    end = time.monotonic() + limit
    while True:
        before = process_cpu({os.getpid()})
        time.sleep(window)
        load = other_load(before, process_cpu({os.getpid()})) / window
        if load < most or time.monotonic() > end:
            return load
        log_wait(load)


def path_drops(prefix=()):
    """The kernel's drop counters on the way to the receiver: the receiving namespace's UDP
    RcvbufErrors (a full socket buffer) and InErrors (this process is in that namespace), and on
    the veth pair (`prefix` runs commands in the sender's namespace) the frames each end dropped:
    the sending veth's when the receiving one's NAPI ring was full."""
    rows = [line.split() for line in Path("/proc/self/net/snmp").read_text().splitlines() if line.startswith("Udp:")]
    udp = dict(zip(rows[0][1:], (int(v) for v in rows[1][1:])))
    out = {"rcvbuf": udp["RcvbufErrors"], "udp_in_errors": udp["InErrors"]}
    if prefix:
        tx_ns = prefix[-1]   # veth_pair's prefix: ip netns exec NAMESPACE
        for key, cmd, direction in (("veth_tx_dropped", ["ip", "-n", tx_ns, "-s", "-j", "link", "show", "rrtx"], "tx"),
                                    ("veth_rx_dropped", ["ip", "-s", "-j", "link", "show", "rrrx"], "rx")):
            stats = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)[0]["stats64"]
            out[key] = stats[direction]["dropped"]
    return out


def measure(exe, payload, rate, seconds, rx_cpu, tx_cpu, gso=0, gro=True, prefix=(), host="127.0.0.1",
            rcvbuf=DEFAULT_RCVBUF):
    """One run: sender at `rate` packets/s (0: unpaced) for `seconds`, RxCore receiving.
    `others` is the CPU other processes used meanwhile, in % of one CPU; `drops` what the
    kernel's counters (path_drops) added meanwhile."""
    os.sched_setaffinity(0, {rx_cpu})
    drops0 = path_drops(prefix)
    with RxCore(host, 0, gro=gro, rcvbuf=rcvbuf) as rx:
        assert rx.gro_active == gro, rx.gro_error
        cmd = list(prefix) + [
               str(exe), "--host", host, "--port", str(rx.port), "--payload", str(payload), "--rate", str(rate),
               "--seconds", str(seconds), "--cpu", str(tx_cpu), "--gso", str(gso_segments(payload, gso)),
               "--batch", "8"]
        others0 = process_cpu({os.getpid()})
        cpu0, t0 = time.thread_time(), time.monotonic()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        received = 0
        while True:
            b = rx.recv(timeout=0.05)
            received += len(b)
            if not len(b) and proc.poll() is not None:
                break
        cpu, wall = time.thread_time() - cpu0, time.monotonic() - t0
        others = other_load(others0, process_cpu({os.getpid(), proc.pid}))
        out = dict(kv.split("=") for kv in proc.stdout.read().split())
        stats = rx.stats()
    drops = {k: v - drops0[k] for k, v in path_drops(prefix).items()}
    sent, tx_seconds = int(out["sent"]), float(out["seconds"])
    achieved = sent / tx_seconds if tx_seconds > 0 else 0.0
    kept_rate = rate == 0 or achieved >= 0.99 * rate
    return dict(payload=payload, rate=rate, sent=sent, received=received, achieved=achieved,
                per_buffer=stats.datagrams / stats.buffers if stats.buffers else 0.0,
                missing=stats.missing, kernel_dropped=stats.kernel_dropped, malformed=stats.malformed_total,
                held=received == sent and stats.missing == 0 and stats.kernel_dropped == 0 and
                stats.malformed_total == 0 and stats.duplicates == 0 and kept_rate,
                kept_rate=kept_rate, rx_cpu=100 * cpu / tx_seconds if tx_seconds else 0.0,
                rx_cpu_wall=100 * cpu / wall, tx_cpu=100 * (float(out["user"]) + float(out["sys"])) / tx_seconds,
                seconds=tx_seconds, others=100 * others / wall, drops=drops)


def describe(m):
    loss = m["sent"] - m["received"]
    return (f"{m['payload']:5d} B  rate {m['rate'] or 'unpaced':>8}  sent {m['achieved']:9.0f}/s  "
            f"lost {loss} (kernel {m['kernel_dropped']}, missing {m['missing']})  "
            f"rx cpu {m['rx_cpu']:.0f} %  tx cpu {m['tx_cpu']:.0f} %  others {m['others']:.0f} %  "
            f"{m['per_buffer']:.1f} datagrams/buffer  "
            f"kernel counters {' '.join(f'{k} {v}' for k, v in m['drops'].items() if v) or 'no drops'}  "
            f"{'held' if m['held'] else 'NOT held'}")


def quiet_measure(exe, payload, rate, seconds, args, log):
    """measure(), repeated while other processes disturbed it (used over --max-others % of a CPU)."""
    for attempt in range(args.retries + 1):
        wait_until_quiet(args.max_wait, lambda load: print(f"  waiting: other processes use {100 * load:.0f} % "
                                                            f"of a CPU", file=sys.stderr, flush=True))
        m = log(measure(exe, payload, rate, seconds, args.rx_cpu, args.tx_cpu, args.gso, not args.no_gro,
                        args.prefix, args.host, args.rcvbuf * 2**20))
        if m["others"] <= args.max_others:
            break
        print(f"  disturbed (other processes used {m['others']:.0f} % of a CPU): again", file=sys.stderr, flush=True)
    return m


def search(exe, payload, args, log):
    """Highest held rate for `payload`: (confirmed measurement, limited_by), found as
    bench/ratesearch.py finds it, to within 1 %."""
    def run(rate, full):
        return quiet_measure(exe, payload, rate, args.seconds if full else args.trial_seconds, args, log)

    ceiling = run(0, False)
    if ceiling["held"]:
        # The receiver keeps up with everything the sender can send: confirm over the full time.
        full = run(0, True)
        if full["held"]:
            return full, "sender"
    _, best = highest_held_rate(run, lambda m: m["held"], offered=lambda m: m["achieved"],
                                received_per_s=lambda m: m["received"] / m["seconds"], steps=args.steps,
                                full_steps=args.full_steps, close=0.01, ceiling=ceiling)
    return best, "receiver"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=10.0, help="length of the runs that count (default 10)")
    p.add_argument("--trial-seconds", type=float, default=2.0, help="length of the search runs (default 2)")
    p.add_argument("--steps", type=int, default=5, help="short-run bisection steps (default 5)")
    p.add_argument("--full-steps", type=int, default=6, help="full-length runs per payload at most (default 6)")
    p.add_argument("--payloads", default="256,1472,8972", help="UDP payload sizes, bytes (default 256,1472,8972)")
    p.add_argument("--gso", type=int, default=0, choices=range(0, 65), metavar="N",
                   help="datagrams per send, as UDP GSO (default 0: as many as fit, up to 64; 1: no GSO)")
    p.add_argument("--path", choices=["veth", "loopback"], default="veth",
                   help="veth: separate frames into a GRO-capable veth, like a NIC (default); loopback")
    p.add_argument("--no-gro", action="store_true", help="RxCore without UDP GRO: every datagram read separately")
    p.add_argument("--rcvbuf", type=int, default=DEFAULT_RCVBUF // 2**20, metavar="MiB",
                   help=f"the receiver's socket buffer (default {DEFAULT_RCVBUF // 2**20}, as ethdaq recv's)")
    p.add_argument("--rx-cpu", type=int, default=0)
    p.add_argument("--tx-cpu", type=int, default=1)
    p.add_argument("--build-dir", default=str(REPO / "build" / "bench"))
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    p.add_argument("--max-others", type=float, default=5.0,
                   help="a run during which other processes used more than this %% of a CPU is repeated (default 5)")
    p.add_argument("--retries", type=int, default=5, help="repeats of a disturbed run (default 5)")
    p.add_argument("--max-wait", type=float, default=600.0,
                   help="seconds to wait for other processes to quiet down before a run (default 600)")
    p.add_argument("--line-rate", type=float, metavar="GBPS",
                   help="instead of the search: each payload at a GBPS link's line rate for --seconds "
                        "(e.g. 10: 812,744 packets/s at 1472 bytes), held or not, with where it fell short")
    args = p.parse_args(argv)
    if args.line_rate is not None and not 0 < args.line_rate <= 400:
        p.error(f"--line-rate takes a link's rate in Gb/s, 0 < GBPS <= 400, not {args.line_rate:g}")
    exe = build_sender(args.build_dir)
    cpus = sorted(os.sched_getaffinity(0))
    if {args.rx_cpu, args.tx_cpu} - set(cpus):
        p.error(f"--rx-cpu and --tx-cpu must be among the CPUs available, {cpus}")

    def log(m):
        print("  " + describe(m), file=sys.stderr, flush=True)
        return m

    # SIGTERM (timeout, kill) unwinds like Ctrl-C, so the namespaces are deleted.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("recvrate: terminated"))
    with contextlib.ExitStack() as stack:
        if args.path == "veth":
            args.prefix, args.host = stack.enter_context(veth_pair())
        else:
            args.prefix, args.host = (), "127.0.0.1"
        if args.line_rate is not None:
            rows = [quiet_measure(exe, payload, line_rate(payload, args.line_rate), args.seconds, args, log)
                    for payload in [int(x) for x in args.payloads.split(",")]]
            report_line_rate(rows, args)
            return 0
        rows, checks = run_all(exe, args, log)
    report(rows, checks, args)
    return 0


def line_rate(payload, gbps):
    """Datagrams per second of `payload`-byte UDP payloads that fill a `gbps` Gb/s Ethernet link:
    each frame adds UDP 8, IPv4 20, Ethernet 14 and FCS 4 bytes, and takes preamble 8 and the
    minimum gap 12 on the wire."""
    return round(gbps * 1e9 / 8 / (payload + 66))


def run_all(exe, args, log):
    rows = []
    for payload in [int(x) for x in args.payloads.split(",")]:
        print(f"payload {payload} bytes:", file=sys.stderr, flush=True)
        m, limit = search(exe, payload, args, log)
        rows.append((payload, m, limit))
    checks = []
    for rate in (ONE_MILLION, LINE_RATE_256):
        print(f"check {rate} packets/s at 256 bytes:", file=sys.stderr, flush=True)
        checks.append(quiet_measure(exe, 256, rate, args.seconds, args, log))
    return rows, checks


def print_setup(args):
    cpu_model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("model name")), "unknown")
    gso = "GSO " + ("as many as fit, up to 64" if args.gso == 0 else str(args.gso)) + " datagrams per send"
    path = ("veth pair (frames, GRO on the receiving side), not a NIC" if args.path == "veth"
            else "loopback, not a NIC")
    print(f"machine: {os.cpu_count()} CPUs ({cpu_model}), Linux {platform.release()}; {path}; "
          f"RxCore {'without' if args.no_gro else 'with'} UDP GRO; "
          f"receiver on CPU {args.rx_cpu}, sender on CPU {args.tx_cpu} ({gso}); "
          f"held = zero loss for {args.seconds:g} s")


def report_line_rate(rows, args):
    """--line-rate's table: each payload at the link's line rate, held or not and why not."""
    print_setup(args)
    head = ["UDP payload (B)", f"{args.line_rate:g} Gb/s line rate (packets/s)", "sent/s", "received", "lost",
            "receiver CPU %", "sender CPU %", "datagrams per read buffer", "other load %", "kernel drop counters", "verdict"]
    lines = []
    for m in rows:
        lost = m["sent"] - m["received"]
        verdict = "held" if m["held"] else ("sender short of the rate" if not m["kept_rate"] and not lost
                                             else "lost datagrams")
        lines.append([str(m["payload"]), f"{m['rate']:,}", f"{m['achieved']:,.0f}", f"{m['received']:,}", f"{lost:,}",
                      f"{m['rx_cpu']:.0f}", f"{m['tx_cpu']:.0f}", f"{m['per_buffer']:.1f}", f"{m['others']:.0f}",
                      ", ".join(f"{k} {v:,}" for k, v in m["drops"].items() if v) or "none", verdict])
    print_table(head, lines, args.markdown)


def report(rows, checks, args):
    print_setup(args)
    head = ["UDP payload (B)", "packets/s held", "MiB/s", "receiver CPU %", "sender CPU %", "limited by",
            "datagrams per read buffer", "other load %"]
    lines = []
    for payload, m, limit in rows:
        if m is None:
            lines.append([str(payload), "none held", "", "", "", limit, "", ""])
        else:
            pps = m["sent"] / m["seconds"]
            lines.append([str(payload), f"{pps:,.0f}", f"{pps * payload / MIB:.1f}", f"{m['rx_cpu']:.0f}",
                          f"{m['tx_cpu']:.0f}", limit, f"{m['per_buffer']:.1f}", f"{m['others']:.0f}"])
    print_table(head, lines, args.markdown)
    for m in checks:
        lost = m["sent"] - m["received"]
        verdict = "held" if m["held"] else "NOT held"
        if not m["kept_rate"]:
            verdict += (f" (the sender only reached {m['achieved']:,.0f}/s" +
                        (f", and even so {lost:,} were lost)" if lost else ")"))
        print(f"{m['rate']:,} packets/s at 256 bytes for {m['seconds']:.0f} s: {verdict} (sent {m['sent']:,}, "
              f"received {m['received']:,}, kernel drops {m['kernel_dropped']}, missing {m['missing']}, "
              f"receiver CPU {m['rx_cpu']:.0f} %, sender CPU {m['tx_cpu']:.0f} %, "
              f"{m['per_buffer']:.1f} datagrams per read buffer, other load {m['others']:.0f} %)")


if __name__ == "__main__":
    sys.exit(main())
