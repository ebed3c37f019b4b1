#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""`ethdaq recv`: receive DAQ datagrams with the C core (ethdaq.host.rxcore), show live rates and
losses, write them to an HDF5 run file (ethdaq.host.h5file) with a JSON summary beside it.

    ethdaq recv --port 5000 -o run.h5 --duration 60

and the same from Python, live:

    from ethdaq.host.recv import batches
    for batch in batches(port=5000, duration=10):      # ethdaq.host.batch.Batch
        for key in batch.keys():
            print(key, batch.stream_samples(key)[:8])

A run ends at --duration, --count, --idle-timeout, Ctrl-C or SIGTERM; in every case everything
received is written and the file closed cleanly, then the summary is printed and written.
"""

import argparse
import datetime
import ipaddress
import resource
import signal
import socket
import sys
import time
import warnings
from pathlib import Path

from ethdaq.host import rxcore
from ethdaq.host.batch import Batch, stream_name
from ethdaq.host import argtypes, publisher, receiver
from ethdaq.host.metrics import address_arg
from ethdaq.host.receiver import MIB, ReceiverError, malformed_text, text_table

REFRESH_S = 0.25   # Live display refresh; also the longest recv() wait, so stops are prompt.
# Exit status of a run that lost data: samples the board dropped (they did not fit the link or
# its buffers), datagrams missing on the network, or datagrams this host's kernel dropped.
EXIT_DATA_LOST = 3
# Exit status of a run in which no datagram arrived at all.
EXIT_NO_DATA = 4
# Exit status of a run that lost nothing here but did not publish every datagram to Kafka.
EXIT_UNPUBLISHED = 5


class RecvError(Exception):
    """A bad argument or environment, reported as one line."""


# What --board-ip records, at the start and at the end of a run: (section suffix, ControlClient method).
BOARD_REPLIES_START = [("identify", "identify"), ("config", "config"), ("status_at_start", "status"),
                       ("ptp_at_start", "ptp_status")]
BOARD_REPLIES_END = [("status_at_end", "status"), ("ptp_at_end", "ptp_status")]


def record_board(writer, ip, port, replies, err, suffix="", known=None):
    """Ask the board and write its replies into the run file's board group (each section's name
    followed by `suffix`; `known` replies, {section: reply}, are written without asking again). A
    board that does not answer costs a warning, never the run: the data is what the file is for."""
    from ethdaq.host.ctl import ControlClient, ControlRefused, ControlTimeout
    from ethdaq.wire.protocol import ProtocolError
    missing = []
    known = known or {}
    for section, _ in replies:
        if known.get(section) is not None:
            writer.set_board(section + suffix, known[section])
    replies = [(section, method) for section, method in replies if known.get(section) is None]
    if not replies:
        return
    try:
        with ControlClient(ip, port, timeout=1.0, retries=2) as c:
            for section, method in replies:
                try:
                    writer.set_board(section + suffix, getattr(c, method)())
                except (ControlRefused, ProtocolError) as e:
                    missing.append(f"{section} ({e})")
    except ControlTimeout as e:
        missing = [f"{section}" for section, _ in replies]
        err.write(f"warning: the board at {ip}:{port} did not answer ({e}); not in the file: {', '.join(missing)}\n")
        return
    if missing:
        err.write(f"warning: not in the file: {'; '.join(missing)}\n")


def add_arguments(p):
    p.add_argument("--port", type=argtypes.port(0), default=rxcore.DEFAULT_PORT, help="UDP port (default 5000)")
    p.add_argument("--bind", default="0.0.0.0", help="local IPv4 address to listen on (default 0.0.0.0)")
    p.add_argument("-o", "--output", metavar="FILE.h5",
                   help="write the run to this HDF5 file and its summary to FILE.json beside it")
    p.add_argument("--overwrite", action="store_true", help="replace FILE.h5 if it exists")
    p.add_argument("--compression", choices=["lzf", "gzip"], help="compress samples and packets in the file")
    p.add_argument("--duration", type=argtypes.positive("duration", float), metavar="S", help="stop after S seconds")
    p.add_argument("--count", type=argtypes.positive("count", int), metavar="N", help="stop after N datagrams with new data")
    p.add_argument("--idle-timeout", type=argtypes.positive("idle timeout", float), metavar="S",
                   help="stop when nothing arrived for S seconds")
    p.add_argument("--rcvbuf", type=argtypes.positive("rcvbuf", int), default=rxcore.DEFAULT_RCVBUF, metavar="BYTES",
                   help=f"socket receive buffer to ask for (default {rxcore.DEFAULT_RCVBUF // MIB} MiB)")
    p.add_argument("--busy-poll", type=argtypes.positive("busy poll", int), metavar="US",
                   help="SO_BUSY_POLL microseconds (NIC drivers with NAPI busy polling)")
    p.add_argument("--kernel-timestamps", action="store_true",
                   help="per-datagram kernel arrival times in rx_time_ns (costs ~15%% of the receive rate; "
                        "default: the time each batch was read)")
    p.add_argument("--no-gro", action="store_true",
                   help="read every datagram separately (default: UDP GRO, runs of datagrams the kernel "
                        "merged are read as one buffer and split; the kernel then counts drops in buffers)")
    p.add_argument("--reuseport", action="store_true",
                   help="share the port with other receivers (SO_REUSEPORT; the kernel spreads sources over them)")
    p.add_argument("--board-ip", type=argtypes.ipv4, metavar="IP", action="append",
                   help="a board sending the run (repeat it for each board): with -o, its IDENTIFY, settings, "
                        "STATUS and PTP state are asked at the start and at the end and written into the file's "
                        "board group, and the events of the event channels its IDENTIFY names are kept beside "
                        "their words; with --kafka, those channels are published as ev44")
    p.add_argument("--board-port", type=argtypes.port(1), default=7000, metavar="PORT",
                   help="the boards' control port, with --board-ip (default 7000)")
    p.add_argument("--progress", choices=["auto", "on", "off"], default="auto",
                   help="live display (default: when stderr is a terminal)")
    p.add_argument("--metrics", type=address_arg, metavar="[ADDR:]PORT",
                   help="serve Prometheus metrics of the run on this HTTP port (ADDR default 127.0.0.1; "
                        "0.0.0.0 for every interface): the counters of the live display, docs/receiver.md")
    k = p.add_argument_group("publishing to Apache Kafka (docs/scaleout.md)")
    k.add_argument("--kafka", metavar="BROKERS",
                   help="also publish every datagram's samples to these Kafka brokers (host:port,...): "
                        "se00 messages, x5f2 status once a second, pl72/6s4t run start and stop")
    k.add_argument("--topic", default=publisher.DEFAULT_TOPIC, help=f"with --kafka: the topic (default "
                   f"{publisher.DEFAULT_TOPIC})")
    k.add_argument("--kafka-batch", type=argtypes.positive("kafka batch", int), default=1, metavar="N",
                   help="with --kafka: up to N consecutive datagrams of a stream in one se00 message (default 1: "
                        "one per datagram; more costs the publisher far less per datagram, docs/scaleout.md)")
    k.add_argument("--kafka-queue", type=argtypes.positive("kafka queue", int), default=publisher.QUEUE_DATAGRAMS,
                   metavar="N", help=f"with --kafka: datagrams waiting for the publishing process at most (default "
                   f"{publisher.QUEUE_DATAGRAMS}: a ring of ~{publisher.QUEUE_DATAGRAMS * publisher.RING_BYTES_PER_DATAGRAM / 2**20:.0f} "
                   f"MiB of shared memory); a batch that does not fit is counted unpublished")
    k.add_argument("--kafka-nice", type=argtypes.int_in(0, 19, "kafka nice"), default=publisher.NICE, metavar="N",
                   help=f"with --kafka: the publishing process runs N steps nicer than the receiver, 0..19 "
                        f"(default {publisher.NICE}; more: on a machine without spare CPU, receiving before publishing)")
    k.add_argument("--kafka-config", metavar="FILE",
                   help="with --kafka: librdkafka settings, key=value lines (security, compression, batch size ...)")
    k.add_argument("--kafka-option", action="append", default=[], metavar="KEY=VALUE",
                   help="with --kafka: one librdkafka setting, after --kafka-config's (repeat it)")


EPILOG = """\
examples:
  ethdaq recv --port 5000 --duration 10                 # table of streams, rates, losses
  ethdaq recv --port 5000 -o run.h5 --count 100000      # ... and an HDF5 file + run.json
  ethdaq recv -o run.h5 --compression lzf               # until Ctrl-C or SIGTERM
  ethdaq recv -o run.h5 --board-ip 192.168.1.50         # ... with the board's identity and settings
  ethdaq recv -o run.h5 --kafka kafka1:9092 --topic detector1  # ... and publish to Kafka too
  ethdaq recv -o run.h5 --kafka kafka1:9092 --kafka-option compression.type=lz4
  ethdaq plot run.h5 -o run.png

exit status: 0 when nothing was lost, 2 for a usage error, 3 when the run lost data: samples the
board dropped (more than the link carries: lower the emulator's rate or enable fewer channels),
datagrams missing on the network, or datagrams this host's kernel dropped (raise net.core.rmem_max);
4 when no datagram arrived at all (the message says what to check); 5 when nothing was lost here
but, with --kafka, datagrams were not published (Kafka down, slow or refusing; counted).
"""


# The run ---------------------------------------------------------------------------------------

class _Stop:
    """Ctrl-C and SIGTERM end the run between two recv() calls, never inside a file write."""
    def __init__(self):
        self.reason = None
        self._old = {}

    def __enter__(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old[sig] = signal.signal(sig, self._handler)
        return self

    def _handler(self, signum, frame):
        self.reason = signal.Signals(signum).name

    def __exit__(self, *exc):
        for sig, old in self._old.items():
            signal.signal(sig, old)


def batches(port=rxcore.DEFAULT_PORT, bind="0.0.0.0", duration=None, count=None, idle_timeout=None,
            core=None, **core_kwargs):
    """Live Batches from an RxCore (opened here with core_kwargs unless `core` is given), until
    duration, count (datagrams with new data) or idle_timeout; empty Batches are skipped."""
    own = core is None
    if own:
        core = rxcore.RxCore(bind=bind, port=port, **core_kwargs)
    try:
        yield from _loop(core, duration, count, idle_timeout, stop=None)
    finally:
        if own:
            core.close()


def _loop(core, duration, count, idle_timeout, stop, on_tick=None):
    start = time.monotonic()
    last_rx = start
    got = 0
    next_tick = start + REFRESH_S
    while True:
        now = time.monotonic()
        if stop is not None and stop.reason:
            return
        if duration is not None and now - start >= duration:
            if stop is not None:
                stop.reason = "duration"
            return
        if idle_timeout is not None and now - last_rx >= idle_timeout:
            if stop is not None:
                stop.reason = "idle timeout"
            return
        wait = REFRESH_S
        if duration is not None:
            wait = max(0.0, min(wait, start + duration - now))
        limit = None if count is None else min(count - got, core.max_packets)
        batch = core.recv(timeout=wait, max_packets=limit)
        if len(batch):
            last_rx = time.monotonic()
            got += len(batch)
            yield batch
        if on_tick is not None and time.monotonic() >= next_tick:
            on_tick()
            next_tick = time.monotonic() + REFRESH_S
        if count is not None and got >= count:
            if stop is not None:
                stop.reason = "count"
            return


def _drain(core, budget=1.0):
    """Batches of what is already queued in the socket, for at most `budget` seconds."""
    end = time.monotonic() + budget
    while time.monotonic() < end:
        before = core.stats().datagrams
        batch = core.recv(timeout=0)
        if len(batch):
            yield batch
        elif core.stats().datagrams == before:
            return


# Display ---------------------------------------------------------------------------------------

def _rows(stats, elapsed, pub=None):
    rows = []
    for key in sorted(stats.streams):
        s = stats.streams[key]
        rate = s["payload_bytes"]/MIB/elapsed if elapsed > 0 else 0.0
        rows.append([stream_name(key), s["datagrams"], f"{rate:.2f}", s["missing"], s["out_of_order"],
                     s["duplicates"], s["board_dropped"], s["overflow_flags"]])
        if pub is not None:
            c = pub.counters.get(key, publisher.StreamCounters())
            rows[-1] += [c.published, c.unpublished]
    return rows


HEAD = ["stream", "datagrams", "MiB/s", "missing", "out-of-order", "duplicates", "board-dropped", "overflow"]
KAFKA_HEAD = ["published", "unpublished"]


def kafka_text(pub):
    """The publisher's totals for people."""
    t = pub.totals()
    text = f"Kafka {t['topic']}: published {t['published']}, unpublished {t['unpublished']}"
    refused = t["queue_full"] + t["buffer_full"]
    if refused:
        text += f" ({refused} refused: local queue full)"
    if t["pending"]:
        text += f", pending {t['pending']}"
    if t["events"] or t["event_words_discarded"]:
        text += f"; events {t['events']} (ev44), words of no whole event {t['event_words_discarded']}"
    if t["client_errors"]:
        text += f"; client errors {t['client_errors']}, newest: {t['last_client_error']}"
    return text


def kernel_drops_text(stats):
    """The kernel's drops for people: a count, or why it is unknown."""
    if stats.kernel_dropped is not None:
        return str(stats.kernel_dropped)
    buffers = getattr(stats, "kernel_dropped_buffers", None)
    if buffers:
        return f"unknown ({buffers} buffers, GRO merges up to 64 datagrams in one)"
    return "unknown"


def board_losses(stats):
    """(samples the board dropped, datagrams it flagged OVERFLOW), over every stream."""
    ss = stats.streams.values()
    return sum(s["board_dropped"] for s in ss), sum(s["overflow_flags"] for s in ss)


def lost_text(stats):
    """Every loss in words of its own: on the board (samples), on the network (datagrams)."""
    return receiver.lost_text(*board_losses(stats), stats.missing)


def data_lost(stats):
    """True when the run lost data anywhere: on the board, on the network or in this host's kernel."""
    dropped, flagged = board_losses(stats)
    kernel = stats.kernel_dropped or getattr(stats, "kernel_dropped_buffers", None)
    return bool(dropped or flagged or stats.missing or kernel)


def _totals_line(stats, elapsed, pub=None):
    kernel = kernel_drops_text(stats)
    malformed = malformed_text(stats.malformed)
    pps = stats.datagrams/elapsed if elapsed > 0 else 0.0
    mib = stats.payload_bytes/MIB/elapsed if elapsed > 0 else 0.0
    line = (f"{stats.datagrams} datagrams, {stats.bytes/MIB:.2f} MiB in {elapsed:.2f} s: {pps:.0f} datagrams/s, "
            f"{mib:.2f} MiB/s of samples; {lost_text(stats)}; malformed {malformed}; kernel drops {kernel}")
    if stats.table_full:
        line += f"; refused (stream table full) {stats.table_full}"
    if pub is not None:
        line += f"; {kafka_text(pub)}"
    return line


def format_table(stats, elapsed, pub=None):
    """Plain-text per-stream table plus a totals line (what the run prints at its end)."""
    rows = [[str(c) for c in r] for r in _rows(stats, elapsed, pub)]
    lines, _ = text_table(HEAD + (KAFKA_HEAD if pub is not None else []), rows)
    lines.append(_totals_line(stats, elapsed, pub))
    return "\n".join(lines)


# The live table's columns (HEAD's indices): what fits 80 columns with a 24-character stream name
# (192.168.177.150_65535_s7), 9-digit counts and a 10 Gb/s rate; out-of-order and duplicates go
# in its caption as totals, and the final table has every column.
LIVE_COLUMNS = (0, 1, 2, 3, 6, 7)


def _live_table(stats, elapsed, rate, pub=None):
    from rich import box
    from rich.table import Table
    t = Table(title=f"ethdaq recv  {elapsed:6.1f} s   {rate[0]:8.2f} MiB/s   {rate[1]:9.0f} packets/s\n"
                    f"{lost_text(stats)}", title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 0),
              pad_edge=False)   # The box's column separators are the only gaps.
    for i in LIVE_COLUMNS:
        t.add_column(HEAD[i], justify="left" if i == 0 else "right", no_wrap=True)
    for r in _rows(stats, elapsed):
        t.add_row(*[str(r[i]) for i in LIVE_COLUMNS])
    out_of_order = sum(s["out_of_order"] for s in stats.streams.values())
    t.caption = (f"out-of-order {out_of_order}, duplicates {stats.duplicates}, malformed {stats.malformed_total}, "
                 f"kernel drops {kernel_drops_text(stats)}" + (f"\n{kafka_text(pub)}" if pub is not None else ""))
    return t


# Summary ---------------------------------------------------------------------------------------

def summary(stats, elapsed, started, stopped_by, core, output=None, pub=None, cpu_s=None):
    """The run summary: a JSON-able dict (run.json, and the file's `summary` attribute); with a
    publisher, its totals in `kafka` and each stream's published and unpublished datagrams.
    `cpu_s`: CPU seconds this process used for the run (cpu_seconds())."""
    streams = {}
    for key in sorted(stats.streams):
        s = dict(stats.streams[key])
        s.update(src_ip=str(ipaddress.IPv4Address(key[0])), src_port=key[1])
        if pub is not None:
            c = pub.counters.get(key, publisher.StreamCounters())
            s.update(published=c.published, unpublished=c.unpublished)
        s["mib_per_s"] = s["payload_bytes"]/MIB/elapsed if elapsed > 0 else 0.0
        streams[stream_name(key)] = s
    return {
        "started": started,
        "elapsed_s": elapsed,
        "stopped_by": stopped_by,
        "bind": core.bind,
        "port": core.port,
        "file": None if output is None else str(output),
        "rcvbuf_requested": core.rcvbuf_requested,
        "rcvbuf_granted": core.rcvbuf_granted,
        "datagrams": stats.datagrams,
        "bytes": stats.bytes,
        "packets": stats.delivered,
        "payload_bytes": stats.payload_bytes,
        "mib_per_s": stats.payload_bytes/MIB/elapsed if elapsed > 0 else 0.0,
        "packets_per_s": stats.datagrams/elapsed if elapsed > 0 else 0.0,
        "missing": stats.missing,
        "data_lost": data_lost(stats),
        "overflow_flags": board_losses(stats)[1],
        "duplicates": stats.duplicates,
        "out_of_order": sum(s["out_of_order"] for s in stats.streams.values()),
        "board_dropped": sum(s["board_dropped"] for s in stats.streams.values()),
        "malformed": stats.malformed_total,
        "malformed_by_reason": dict(stats.malformed),
        "kernel_dropped": stats.kernel_dropped,
        "kernel_dropped_buffers": getattr(stats, "kernel_dropped_buffers", None),
        "gro": getattr(core, "gro_active", False),
        "table_full": stats.table_full,
        "cpu_s": cpu_s,
        "kafka": None if pub is None else pub.totals(),
        "streams": streams,
    }


def cpu_seconds():
    """CPU seconds (user and system, every thread) this process has used; a run's summary has
    what it used from the start of receiving to its end in `cpu_s` (with --kafka, the publishing
    process's in kafka.process_cpu_s)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _file_meta(args, core):
    """What the receiver knows of the run for the file's root attributes. It has no control
    connection: the board's own replies go in the file's `board` group (h5file.Writer.set_board)."""
    return {
        "command": " ".join(sys.argv),
        "receiver_host": socket.gethostname(),
        "bind": core.bind,
        "port": core.port,
        "rx_time_ns_source": ("kernel arrival time (SO_TIMESTAMPNS)" if args.kernel_timestamps else
                              "host clock after each receive call (CLOCK_REALTIME, shared by its batch)"),
        "gro": bool(getattr(core, "gro_active", False)),
        "rcvbuf_granted": int(core.rcvbuf_granted),
    }


def no_data_hint(bind, port):
    """What to check when nothing arrived, in the order a datagram travels."""
    return (f"warning: no datagram arrived on UDP {bind}:{port}: is a run going to this host and port "
            f"(`ethdaq ctl status --ip BOARD`: running, datagrams, destination; `ethdaq ctl start --ip BOARD "
            f"--dst-port {port}`)? Does this host have an address on the board's subnet (`ip addr`), and does its "
            f"firewall let UDP port {port} in? Exit status {EXIT_NO_DATA}")


def summary_path(output):
    return Path(output).with_suffix(".json")


# Command ---------------------------------------------------------------------------------------

def _check_kafka_args(args):
    if not getattr(args, "kafka", None):
        if getattr(args, "kafka_config", None) or getattr(args, "kafka_option", None) or \
                getattr(args, "kafka_batch", 1) != 1 or getattr(args, "kafka_nice", publisher.NICE) != publisher.NICE or \
                getattr(args, "kafka_queue", publisher.QUEUE_DATAGRAMS) != publisher.QUEUE_DATAGRAMS:
            raise RecvError("--kafka-config, --kafka-option, --kafka-batch, --kafka-queue and --kafka-nice set up "
                            "publishing: give the brokers with --kafka")
        return None
    try:
        settings = publisher.read_config(args.kafka_config) if args.kafka_config else {}
        settings.update(publisher.parse_option(o) for o in args.kafka_option)
    except publisher.PublishError as e:
        raise RecvError(str(e)) from None
    return settings


# What becomes of a board's event channels, by output: (when its IDENTIFY names them, when it does not answer).
EVENT_USES = {"kafka": ("published as ev44", "published as se00"),
              "file": ("kept as events in the run file", "no events in the run file")}


def board_events(ip, port, uses=("kafka",)):
    """The event channels of the board at `ip` from its IDENTIFY (for the publisher, ev44, and the
    run file), a line saying which and what becomes of them (`uses`: keys of EVENT_USES), and the
    IDENTIFY reply; when the board does not answer, no event channels, a warning line and None
    (its channels are then samples)."""
    from ethdaq.host.ctl import ControlClient, ControlRefused, ControlTimeout
    from ethdaq.wire.protocol import ProtocolError
    try:
        with ControlClient(ip, port, timeout=1.0, retries=2) as c:
            ident = c.identify()
    except (ControlTimeout, ControlRefused, ProtocolError, OSError) as e:
        return {}, (f"warning: the board at {ip}:{port} did not answer IDENTIFY ({e}): its channels are "
                    f"taken as samples ({' and '.join(EVENT_USES[u][1] for u in uses)})"), None
    note = (f"event channels of {ip}, {' and '.join(EVENT_USES[u][0] for u in uses)}: " + ", ".join(
        f"{ch} ({bits}-bit ids)" for ch, bits in sorted(ident.event_channels.items()))) if ident.event_channels else ""
    return publisher.event_channels(ip, ident), note, ident


def boards_events(args, kafka, output, notes):
    """The event channels of every --board-ip (their IDENTIFY), for the publisher and the run
    file, a line for each board that has some (or did not answer) added to `notes`; and each
    board's IDENTIFY reply (None: no answer), {ip: reply}."""
    uses = (["kafka"] if kafka else []) + (["file"] if output else [])
    events, idents = {}, {}
    for ip in args.board_ip or []:
        got, note, idents[ip] = board_events(ip, args.board_port, uses)
        events.update(got)
        notes += [note] if note else []
    return events, idents


def board_suffix(args, ip):
    """The board group's section names of one board: as they are with one --board-ip, followed by
    the board's address (identify_192_168_1_50) with several."""
    return "" if len(args.board_ip or []) < 2 else "_" + ip.replace(".", "_")


def _open_publisher(args, settings, core, output, writer, events):
    """The run's Kafka publisher (its pl72 run start queued), or None without --kafka. `events`:
    the boards' event channels (boards_events()), published as ev44."""
    if settings is None:
        return None
    meta = {"receiver_host": socket.gethostname(), "bind": core.bind, "port": core.port}
    try:
        return publisher.Publisher(args.kafka, topic=args.topic, settings=settings, filename=str(output or ""),
                                   job_id=writer.run_uuid if writer is not None else None, metadata=meta,
                                   datagrams_per_message=args.kafka_batch, queue_datagrams=args.kafka_queue,
                                   nice=args.kafka_nice, events=events)
    except publisher.PublishError as e:
        raise RecvError(str(e)) from None


def run(args, out=sys.stdout, err=sys.stderr):
    """`ethdaq recv`. Returns the exit status; raises RecvError for one-line errors."""
    from ethdaq.host import h5file
    output = Path(args.output) if args.output else None
    kafka_settings = _check_kafka_args(args)
    _check_outputs(args, output, kafka_settings)
    core = _open_core(args, err)
    writer = pub = None
    with core:
        started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        notes = []       # Datagrams arriving while the boards are asked wait in the socket.
        events, idents = boards_events(args, kafka_settings is not None, output, notes)
        if output is not None:
            try:
                writer = h5file.Writer(output, compression=args.compression, overwrite=args.overwrite,
                                       meta=_file_meta(args, core), events=events)
            except (h5file.RunFileError, ValueError) as e:
                raise RecvError(str(e)) from None
        metrics = _serve_metrics(args, writer, output)
        try:
            pub = _open_publisher(args, kafka_settings, core, output, writer, events)
        except RecvError:
            if writer is not None:
                writer.close()
                output.unlink(missing_ok=True)
            raise
        err.write(f"receiving on UDP {core.bind}:{core.port}" + (f", writing {output}" if output else "") +
                  (f", publishing to Kafka {args.kafka} topic {args.topic}" if pub else "") + "; Ctrl-C stops\n")
        for note in notes:
            err.write(note + "\n")
        err.flush()
        if writer is not None:   # Datagrams arriving meanwhile wait in the socket.
            for ip in args.board_ip or []:
                record_board(writer, ip, args.board_port, BOARD_REPLIES_START, err, board_suffix(args, ip),
                             known={"identify": idents[ip]})
        t0, cpu0 = time.monotonic(), cpu_seconds()
        stopped_by = "error"
        try:
            stopped_by = _receive(args, core, writer, pub, metrics, err, t0)
        finally:
            elapsed = time.monotonic() - t0
            stats = core.stats()
            if pub is not None:
                pub.close(stats)
            if metrics is not None:
                metrics.update(stats, pub, running=False)
            result = summary(stats, elapsed, started, stopped_by, core, output, pub, cpu_seconds() - cpu0)
            if writer is not None:
                for ip in args.board_ip or []:
                    record_board(writer, ip, args.board_port, BOARD_REPLIES_END, err, board_suffix(args, ip))
                add_file_events(result, writer)
                result["run_uuid"] = writer.run_uuid
                writer.close(summary=result)
                h5file.write_summary_json(summary_path(output), result)
    return _report(result, stats, elapsed, core, output, pub, out, err)


def _check_outputs(args, output, kafka_settings):
    """The run file and --board-ip checked before anything is opened."""
    if args.board_ip and output is None and kafka_settings is None:
        raise RecvError("--board-ip records the board's replies in the run file and names its event channels "
                        "for --kafka: give the file with -o FILE.h5, or --kafka")
    if args.board_ip and len(set(args.board_ip)) != len(args.board_ip):
        raise RecvError(f"--board-ip names each board once, not {', '.join(args.board_ip)}")
    if output is not None:
        if output.exists() and not args.overwrite:
            raise RecvError(f"{output} exists: choose another name or add --overwrite")
        if not output.parent.is_dir():
            raise RecvError(f"cannot write {output}: directory {output.parent} does not exist")


def _open_core(args, err):
    """The receive core on the options' socket; what the kernel refused is one warning line each."""
    try:
        with warnings.catch_warnings():  # Printed below as one line each, not as Python warnings.
            warnings.simplefilter("ignore", rxcore.RcvbufWarning)
            warnings.simplefilter("ignore", rxcore.BusyPollWarning)
            core = rxcore.RxCore(bind=args.bind, port=args.port, rcvbuf=args.rcvbuf,
                                 busy_poll_us=args.busy_poll or 0, reuseport=args.reuseport,
                                 kernel_timestamps=args.kernel_timestamps, gro=not args.no_gro)
    except (ReceiverError, ValueError) as e:
        raise RecvError(str(e)) from None
    note = core.rcvbuf_warning()
    if note:
        err.write(f"warning: {note}\n")
    if args.busy_poll and core.busy_poll_error:
        err.write(f"warning: SO_BUSY_POLL refused ({core.busy_poll_error}): receiving without busy polling\n")
    return core


def _receive(args, core, writer, pub, metrics, err, t0):
    """The receive loop: every Batch to the run file and the publisher, the live display and the
    metrics at each tick, until the run stops; returns why it stopped."""
    live = None
    show = args.progress == "on" or (args.progress == "auto" and err.isatty())
    last = [t0, 0, 0]
    rate = [0.0, 0.0]

    def tick():
        if writer is not None:
            writer.write(Batch.empty())  # Lets the writer's timed flush run while no data comes.
        st = core.stats()                # One snapshot for the publisher, the metrics and the display.
        if pub is not None:
            pub.tick(st)
        if metrics is not None:
            metrics.update(st, pub)
        if live is None:
            return
        now = time.monotonic()
        dt = now - last[0]
        if dt > 0:
            rate[0] = (st.payload_bytes - last[1])/MIB/dt
            rate[1] = (st.datagrams - last[2])/dt
        last[:] = [now, st.payload_bytes, st.datagrams]
        live.update(_live_table(st, now - t0, rate, pub))

    def take(batch):
        if writer is not None:
            writer.write(batch)
        if pub is not None:
            pub.publish(batch)

    with _Stop() as stop:
        if show:
            from rich.console import Console
            from rich.live import Live
            live = Live(_live_table(core.stats(), 0.0, rate, pub), console=Console(file=err),
                        auto_refresh=False, transient=True)
            live.start()
        try:
            for batch in _loop(core, args.duration, args.count, args.idle_timeout, stop, on_tick=tick):
                take(batch)
                if live is not None:
                    live.refresh()
            if stop.reason != "count":
                # What the kernel already queued was received by this host: keep it.
                for batch in _drain(core):
                    take(batch)
        finally:
            if live is not None:
                live.stop()
        return stop.reason or "end"


def add_file_events(result, writer):
    """The run file's events (its channels of events) into the summary: per stream `file_events`
    and `file_event_words_discarded` (words of no whole event, an unfinished one at the end
    included), their totals in `file_events`."""
    writer.flush()
    counts = writer.event_counts()
    for name, (n, discarded, pending) in counts.items():
        stream = result["streams"].get(name)
        if stream is not None:
            stream.update(file_events=n, file_event_words_discarded=discarded + pending)
    result["file_events"] = None if not counts else {
        "channels": len(counts), "events": sum(c[0] for c in counts.values()),
        "event_words_discarded": sum(c[1] + c[2] for c in counts.values())}


def _serve_metrics(args, writer, output):
    """The Prometheus collector (None without --metrics); a port that cannot be served ends the
    run before it starts, as a bad --kafka does."""
    if args.metrics is None:
        return None
    from ethdaq.host.metrics import MetricsError, serve
    try:
        return serve(args.metrics)[0]
    except MetricsError as e:
        if writer is not None:
            writer.close()
            output.unlink(missing_ok=True)
        raise RecvError(str(e)) from None


def _report(result, stats, elapsed, core, output, pub, out, err):
    """The final table and lines of a run; returns its exit status."""
    out.write(format_table(stats, elapsed, pub) + "\n")
    if output is not None:
        ev = result.get("file_events")
        out.write(f"wrote {output} ({result['packets']} datagrams" +
                  (f"; events {ev['events']} of {ev['channels']} event channels, words of no whole event "
                   f"{ev['event_words_discarded']}" if ev else "") + f") and {summary_path(output)}\n")
    out.flush()
    if stats.datagrams == 0:
        err.write(no_data_hint(core.bind, core.port) + "\n")
        return EXIT_NO_DATA
    if result["data_lost"]:
        err.write(f"warning: this run lost data ({lost_text(stats)}; kernel drops {kernel_drops_text(stats)}): "
                  f"exit status {EXIT_DATA_LOST}\n")
        return EXIT_DATA_LOST
    if pub is not None and result["kafka"]["unpublished"]:
        err.write(f"warning: not every datagram reached Kafka ({kafka_text(pub)}): exit status {EXIT_UNPUBLISHED}\n")
        return EXIT_UNPUBLISHED
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(prog="ethdaq recv", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    args = p.parse_args(argv)
    try:
        return run(args)
    except RecvError as e:
        sys.stderr.write(f"Error: {e}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main())
