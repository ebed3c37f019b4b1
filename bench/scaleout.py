#!/usr/bin/env python3
#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Publishing to Apache Kafka end to end, on loopback: `ethdaq recv --kafka` (the CLI as users
run it, with -o to a run file on tmpfs) receives DAQ datagrams from a C sender (bench/udpblast.c,
built with gcc into build/bench/) and publishes them into a single-node broker on this PC
(ethdaq.kafkabroker, started here unless --bootstrap names one), at --kafka-batch 1, 8 and 64,
and once without Kafka for comparison.

The sender sends --datagrams datagrams of --bytes bytes (DAQ header included, 16-bit samples,
one stream, consecutive seq) with sendmmsg, one datagram per send, unpaced or at --rate
datagrams/s. Simulated: no board, no NIC; the sender, the receiver, its publishing process and
the broker's JVM share this machine's CPUs, so the figures are what that mix gives.

Per run: `offered` = datagrams sent / sending time; `received/s` = the receiver's own rate
(datagrams / its elapsed time, run.json); `lost` = datagrams missing at the receiver (kernel
drops and gaps: what the run file lacks); `published/s` and `MiB/s` = datagrams (samples) the
broker acknowledged / the time from the first datagram sent until the receiver exited (its
close() waits for every delivery report); `unpublished` = the receiver's count of the rest
(ring full, delivery failed); `recv-CPU-%` = CPU time of the receiver's process over its
receiving time (run.json's cpu_s / elapsed_s) and `pub-CPU-%` = its publishing process's over
the publishing time above (kafka.process_cpu_s), in % of one core; with --zero-loss also
`broker-CPU-%`, the broker's JVM's over the same time (when this bench started the broker). Each row is the median over --repeats runs (the machine may be shared); with
--markdown each cell also gives the range over the runs, and the load average is printed.

First, the cost of building one se00 message of 1, 8 and 64 datagrams' samples, in this process:
ess-streaming-data-types' serialise_se00 against ethdaq.host.se00's template (best of 5 timeit
runs each).

    .venv/bin/python bench/scaleout.py [--datagrams 100000] [--repeats 3] [--rate 0] [--markdown]
    .venv/bin/python bench/scaleout.py --quick --bootstrap 127.0.0.1:9092    # a few seconds

With --zero-loss, instead of the table at --rate: each row's highest paced rate at which nothing
is lost and, with Kafka, nothing is unpublished and the broker's acknowledgements keep pace
(the receiver exits at most 1 s after the last datagram is sent, so a publisher that only
fills its ring while the run lasts does not count), found by bisection with short runs and confirmed with
--seconds-long runs as bench/recvrate.py does; each Kafka row also as % of the receiver's
zero-loss rate alone.

    .venv/bin/python bench/scaleout.py --zero-loss --batches none,64 --markdown
"""

import argparse
import contextlib
import json
import os
import re
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench.ratesearch import highest_held_rate                                # noqa: E402
from bench.recvrate import build_sender                                      # noqa: E402
from bench.table import print_table                                          # noqa: E402
from ethdaq.wire.daqformat import HEADER_LEN                                 # noqa: E402

CLI = [sys.executable, "-m", "ethdaq.soc.cli"]
PERIOD_NS = 8
T0 = 1_795_000_000_000_000_000
MIB = 2**20
DRAIN_S = 1.0        # a run's end: the receiver's exit and its last delivery reports take 0.1 - 0.6 s


def send(exe, port, count, size, rate):
    """`count` datagrams of `size` bytes to 127.0.0.1:port, unpaced (rate 0) or at `rate`
    datagrams/s; returns (start time, sending seconds)."""
    t0 = time.monotonic()
    r = subprocess.run([str(exe), "--port", str(port), "--payload", str(size), "--rate", str(rate),
                        "--count", str(count), "--gso", "1"], capture_output=True, text=True, timeout=600)
    if r.returncode:
        sys.exit(f"udpblast failed: {r.stderr.strip()}")
    out = dict(kv.split("=") for kv in r.stdout.split())
    return t0, float(out["seconds"])


def encode_costs(size):
    """[(datagrams per message, library us, template us)] for messages of `size`-byte datagrams."""
    import timeit
    from streaming_data_types.array_1d_se00 import serialise_se00
    from streaming_data_types.fbschemas.array_1d_se00.Location import Location
    from ethdaq.host.se00 import Encoder
    encode, name, out = Encoder(), "192.168.1.50_5001_s0", []
    for n in (1, 8, 64):
        values = np.arange(n * ((size - HEADER_LEN) // 2), dtype=np.uint16)
        lib = min(timeit.repeat(lambda: serialise_se00(name, 0, T0, PERIOD_NS, 1, values, ts_location=Location.Start),
                                number=200, repeat=5)) / 200
        ours = min(timeit.repeat(lambda: encode(name, 0, T0, PERIOD_NS, 1, values), number=200, repeat=5)) / 200
        out.append((n, lib * 1e6, ours * 1e6))
    return out


def free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_run(workdir, bootstrap, batch, exe, count, size, rate, nice=None):
    """One receiver run; returns its figures as a dict."""
    port = free_udp_port()
    out = Path(workdir) / f"scaleout-{uuid.uuid4().hex[:8]}.h5"
    cmd = CLI + ["recv", "--bind", "127.0.0.1", "--port", str(port), "--progress", "off", "-o", str(out),
                 "--count", str(count), "--idle-timeout", "2"]
    topic = f"scaleout-{uuid.uuid4().hex[:8]}"
    if batch is not None:
        cmd += ["--kafka", bootstrap, "--topic", topic, "--kafka-batch", str(batch)]
        cmd += [] if nice is None else ["--kafka-nice", str(nice)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stderr.readline()
    if "receiving on UDP" not in line:
        p.kill()
        sys.exit(f"ethdaq recv did not start: {line}{p.stderr.read()}")
    broker_cpu = process_cpu_s(BROKER_PID)
    t0, sent = send(exe, port, count, size, rate)
    _, err = p.communicate(timeout=600)
    wall = time.monotonic() - t0
    broker_cpu = None if broker_cpu is None else process_cpu_s(BROKER_PID) - broker_cpu
    if p.returncode not in (0, 3, 5):              # 3: data lost, 5: not all published; both measured
        sys.exit(f"ethdaq recv failed (exit status {p.returncode}): {err.strip()}")
    summary = json.loads(out.with_suffix(".json").read_text())
    for f in (out, out.with_suffix(".json")):
        f.unlink(missing_ok=True)
    receiving = summary["elapsed_s"]
    if summary["stopped_by"] == "idle timeout":      # the receiver waited for datagrams that were lost
        wall, receiving = wall - 2.0, receiving - 2.0
    k = summary["kafka"] or {}
    sample_bytes = summary["payload_bytes"] / max(1, summary["packets"])
    published = k.get("published", 0)
    return {"offered": count / sent, "received_per_s": summary["packets"] / receiving,
            "lost": count - summary["packets"], "published_per_s": published / wall,
            "mib_per_s": published * sample_bytes / MIB / wall, "unpublished": k.get("unpublished", 0),
            "published": published, "recv_cpu": 100 * summary["cpu_s"] / receiving,
            "pub_cpu": 100 * k.get("process_cpu_s", 0.0) / wall, "topic": topic,
            "samples": summary["packets"] * ((size - HEADER_LEN) // 2), "sending_s": sent, "drain_s": wall - sent,
            "broker_cpu": None if broker_cpu is None or batch is None else 100 * broker_cpu / wall}


MERGED = re.compile(r"^merged .*?: (\d+) messages .*?, (\d+) samples of (\d+) sources.*; largest lag ([\d.]+) (ms|us)")


def merge_run(workdir, bootstrap, topic, sample_bytes=2):
    """`ethdaq merge --until-stop` of one published topic into a file on `workdir`: messages,
    samples, seconds, and its CPU in % of one core over that time."""
    out = Path(workdir) / f"merge-{uuid.uuid4().hex[:8]}.h5"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    r = subprocess.run(CLI + ["merge", "--kafka", bootstrap, "--topic", topic, "-o", str(out), "--until-stop"],
                       capture_output=True, text=True, timeout=600)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out.unlink(missing_ok=True)
    m = next(filter(None, map(MERGED.match, (r.stdout + r.stderr).splitlines())), None)
    if r.returncode != 0 or m is None:
        sys.exit(f"ethdaq merge failed (exit status {r.returncode}): {(r.stdout + r.stderr).strip()[-2000:]}")
    messages, samples = int(m.group(1)), int(m.group(2))
    lag_ms = float(m.group(4)) / (1 if m.group(5) == "ms" else 1000)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {"messages_per_s": messages / wall, "mib_per_s": samples * sample_bytes / MIB / wall,
            "cpu": 100 * cpu / wall, "seconds": wall, "samples": samples, "lag_ms": lag_ms}


def cell(values, spec, markdown):
    """The median of `values` as `spec` formats it; in Markdown with the range when they differ."""
    text = format(statistics.median(values), spec)
    lo, hi = format(min(values), spec), format(max(values), spec)
    return f"{text} ({lo} - {hi})" if markdown and lo != hi else text


def held(run, batch):
    """A run held its rate: nothing lost; with Kafka also nothing unpublished, and the publishing
    kept pace: the receiver exited (its last delivery report in) at most DRAIN_S after the last
    datagram was sent. A publisher slower than the rate fills its ring while the run lasts and
    drains it afterwards: over a 10 s run, a deficit of more than about 5 to 9 % shows (and one of
    more than 65536 datagrams, the ring's room, is counted unpublished)."""
    if run["lost"]:
        return False
    return batch is None or (run["unpublished"] == 0 and run["drain_s"] <= DRAIN_S)


def zero_loss_rate(measure, batch, steps, full_steps):
    """Highest paced rate that `measure(rate, long)` holds (held()), found as bench/ratesearch.py
    finds it, to within 2 %. Returns (rate, the held full-length run) or (0, None)."""
    rate, best = highest_held_rate(measure, lambda m: held(m, batch), offered=lambda m: m["offered"],
                                   received_per_s=lambda m: m["received_per_s"], steps=steps,
                                   full_steps=full_steps, close=0.02)
    return (rate, dict(best, rate=rate)) if best else (0, None)


def zero_loss_table(args, bootstrap, exe, batches):
    """Each row's highest zero-loss rate and, for Kafka rows, that rate against the receiver's
    alone (the first row without Kafka)."""
    rows, alone = [], None
    for batch in batches:
        def measure(rate, full, batch=batch):
            count = args.datagrams if not rate else max(1000, int(rate * (args.seconds if full else args.trial_seconds)))
            r = one_run(args.dir, bootstrap, batch, exe, count, args.bytes, rate, args.kafka_nice)
            print(f"  kafka-batch {batch}: {'unpaced' if not rate else f'{rate:,.0f}/s'} x {count}: "
                  f"{'held' if held(r, batch) else 'not held'} (lost {r['lost']}, unpublished {r['unpublished']}, "
                  f"drain {r['drain_s']:.2f} s)", file=sys.stderr, flush=True)
            return r
        rate, run = zero_loss_rate(measure, batch, args.steps, args.full_steps)
        alone = rate if batch is None and alone is None else alone
        share = f"{100 * rate / alone:.0f}" if batch is not None and alone else "-"
        rows.append(["no Kafka" if batch is None else str(batch), f"{rate:,.0f}",
                     f"{rate * (args.bytes - HEADER_LEN) / MIB:.1f}",
                     f"{run['recv_cpu']:.0f}" if run else "-",
                     f"{run['published_per_s']:,.0f}" if run and batch is not None else "-",
                     f"{run['pub_cpu']:.0f}" if run and batch is not None else "-",
                     f"{run['broker_cpu']:.0f}" if run and run["broker_cpu"] is not None else "-", share])
    return rows


def process_cpu_s(pid):
    """CPU seconds (user + system) process `pid` has used, from /proc; None without one."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, TypeError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


BROKER_PID = None    # the broker's JVM when this bench started it: its CPU is measured


@contextlib.contextmanager
def broker(bootstrap):
    global BROKER_PID
    if bootstrap:
        yield bootstrap
        return
    from ethdaq.kafkabroker import BrokerError, KafkaBroker
    try:
        b = KafkaBroker().start()
    except BrokerError as e:
        sys.exit(f"no Kafka broker: {e} (make kafka fetches its jars)")
    BROKER_PID = b.proc.pid
    try:
        yield b.bootstrap
    finally:
        BROKER_PID = None
        b.close()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datagrams", type=int, default=100000, help="datagrams per run (default 100000)")
    parser.add_argument("--bytes", type=int, default=1472, help="UDP payload per datagram (default 1472)")
    parser.add_argument("--rate", type=float, default=0, help="datagrams/s to send (default 0: unpaced)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per row; the table shows the median")
    parser.add_argument("--bootstrap", help="use this broker (host:port) instead of starting one")
    parser.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir(),
                        help="directory for the run files (default /dev/shm)")
    parser.add_argument("--batches", default="none,1,8,64",
                        help="rows: --kafka-batch values, none for the receiver alone (default none,1,8,64)")
    parser.add_argument("--kafka-nice", type=int, help="ethdaq recv --kafka-nice (default: its default)")
    parser.add_argument("--quick", action="store_true",
                        help="2000 datagrams, one run per row; with --zero-loss 0.5 s runs (a smoke test)")
    parser.add_argument("--no-merge", action="store_true", help="skip ethdaq merge of each run's topic")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    z = parser.add_argument_group("zero-loss rate (instead of the table at --rate)")
    z.add_argument("--zero-loss", action="store_true",
                   help="each row's highest paced rate with nothing lost and, with Kafka, nothing unpublished "
                        "and publishing keeping pace; Kafka rows as %% of the receiver's rate alone")
    z.add_argument("--seconds", type=float, default=10, help="length of the runs that count (default 10)")
    z.add_argument("--trial-seconds", type=float, default=2, help="length of the search runs (default 2)")
    z.add_argument("--steps", type=int, default=5, help="short-run bisection steps (default 5)")
    z.add_argument("--full-steps", type=int, default=8, help="full-length runs per row at most (default 8)")
    args = parser.parse_args(argv)
    try:
        batches = [None if b == "none" else int(b) for b in args.batches.split(",")]
    except ValueError:
        parser.error(f"--batches takes none and positive integers, comma-separated, not {args.batches!r}")
    if any(b is not None and b < 1 for b in batches):
        parser.error("--batches takes none and positive integers")
    if args.quick:
        args.datagrams, args.repeats = 2000, 1
        args.seconds, args.trial_seconds, args.steps, args.full_steps = 0.5, 0.25, 1, 4
    if not HEADER_LEN + 2 <= args.bytes <= 65507 or args.datagrams < 1 or args.repeats < 1:
        parser.error("--bytes must leave room for samples, --datagrams and --repeats must be positive")
    print(f"se00 message of N datagrams of {args.bytes} bytes: build time, us")
    print_table(["N", "serialise_se00", "ethdaq.host.se00"],
                [[str(n), f"{lib:.1f}", f"{ours:.1f}"] for n, lib, ours in encode_costs(args.bytes)],
                markdown=args.markdown)
    print()
    exe = build_sender(REPO / "build" / "bench")
    if args.zero_loss:
        with broker(args.bootstrap) as bootstrap:
            load = os.getloadavg()
            rows = zero_loss_table(args, bootstrap, exe, batches)
            load = f"{load[0]:.2f} - {os.getloadavg()[0]:.2f}"
        print(f"highest zero-loss rate of ethdaq recv alone and with --kafka (simulated: sender, receiver and "
              f"broker on this machine), {args.bytes}-byte datagrams, confirmed over {args.seconds:g} s; "
              f"load average (1 min) {load}")
        print_table(["kafka-batch", "datagrams/s", "MiB/s", "recv-CPU-%", "published/s", "pub-CPU-%",
                     "broker-CPU-%", "% of alone"], rows, markdown=args.markdown)
        return 0
    rows, merges = [], []
    with broker(args.bootstrap) as bootstrap:
        load = os.getloadavg()
        for batch in batches:
            runs = [one_run(args.dir, bootstrap, batch, exe, args.datagrams, args.bytes, args.rate, args.kafka_nice)
                    for _ in range(args.repeats)]
            col = {key: [r[key] for r in runs] for key in runs[0]}
            kafka = [cell(col["published_per_s"], ",.0f", args.markdown), cell(col["mib_per_s"], ".1f", args.markdown),
                     cell(col["unpublished"], ",.0f", args.markdown), cell(col["pub_cpu"], ".0f", args.markdown)]
            rows.append(["no Kafka" if batch is None else str(batch), cell(col["offered"], ",.0f", args.markdown),
                         cell(col["received_per_s"], ",.0f", args.markdown), cell(col["lost"], ",.0f", args.markdown),
                         cell(col["recv_cpu"], ".0f", args.markdown)] + (["-"] * 4 if batch is None else kafka))
            if batch is not None and not args.no_merge:
                m = [merge_run(args.dir, bootstrap, r["topic"]) for r in runs]
                # Every sample the receiver took is in the merged file once: published ones only
                # (unpublished ones are counted, not there), so the two agree when none is.
                whole = all(x["samples"] == r["samples"] for x, r in zip(m, runs) if r["unpublished"] == 0)
                mc = {key: [x[key] for x in m] for key in m[0]}
                merges.append([str(batch), cell(mc["seconds"], ".1f", args.markdown),
                               cell(mc["messages_per_s"], ",.0f", args.markdown),
                               cell(mc["mib_per_s"], ".1f", args.markdown), cell(mc["cpu"], ".0f", args.markdown),
                               cell(mc["lag_ms"], ".3f", args.markdown), "yes" if whole else "NO"])
        load = f"{load[0]:.2f} - {os.getloadavg()[0]:.2f}"
    print(f"ethdaq recv -> Kafka on loopback (simulated: sender, receiver and broker on this machine), "
          f"{args.datagrams} datagrams of {args.bytes} bytes, {'unpaced' if not args.rate else f'{args.rate:.0f}/s'}, "
          f"median of {args.repeats}; load average (1 min) {load}")
    print_table(["kafka-batch", "offered/s", "received/s", "lost", "recv-CPU-%", "published/s", "MiB/s",
                 "unpublished", "pub-CPU-%"], rows, markdown=args.markdown)
    if merges:
        print()
        print("ethdaq merge --until-stop of each run's topic into an HDF5 file (1 ms slices): seconds, "
              "messages/s, MiB/s of samples, CPU in % of one core, the largest lag (how far a message's first "
              "sample lay behind the merge's frontier; the default --watermark is 50 ms) and whether every "
              "sample the receiver published is in the file")
        print_table(["kafka-batch", "seconds", "messages/s", "MiB/s", "merge-CPU-%", "largest-lag-ms", "every sample"],
                    merges, markdown=args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
