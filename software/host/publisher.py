#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Publishing received DAQ datagrams to Apache Kafka in the European Spallation Source's
FlatBuffers conventions (the `ess-streaming-data-types` schemas), with librdkafka (confluent-kafka).

    from ethdaq.host.publisher import Publisher
    from ethdaq.host.recv import batches
    with Publisher("127.0.0.1:9092", topic="ethdaq") as pub:     # pl72 run start
        for batch in batches(port=5000, duration=10):
            pub.publish(batch)                                  # one se00 message per datagram
    print(pub.counters)                                         # 6s4t run stop sent on close

Messages on the topic (docs/scaleout.md has the whole layout):

- ev44 instead of se00 for the datagrams of an event channel (`events`; ethdaq.host.events has
  the words' layout): source_name = the stream's name, message_id = the (first) DAQ sequence
  number, one reference_time per datagram (its header timestamp) with the index of the first
  event that ends in it, time_of_flight = each event's time - its reference (ns), pixel_id = the
  event's id;
- se00 for every datagram with new data (or, with datagrams_per_message N, for every run of up to
  N consecutive datagrams of one stream in a Batch), keyed by its stream's name (`stream_name`:
  board address, UDP port, stream id), so one stream's messages share a partition and stay in
  order: name = the stream's name, channel = stream id, timestamp = the (first) datagram's header
  timestamp (PTP time of its first sample, ns; timestamp location Start), time delta = the sample
  period in ns (measured from consecutive datagrams of the stream, 0 until two have arrived),
  message_counter = the (first) DAQ sequence number, values = the samples as unsigned integers;
  the Kafka header `datagrams` says how many datagrams the message holds;
- x5f2 once a second (and at the end) for each stream, keyed like its data: the counters of the
  receive core (received, lost, duplicates, board-dropped) and of this publisher (published,
  unpublished, pending) as JSON in status_json;
- pl72 when the run starts and 6s4t when it stops, keyed `run`.

Kafka slow or down never stalls the receiver, and building messages never takes its CPU:
publishing runs in a process of its own (ethdaq.host.pubworker), so the receive loop and the
publisher each have an interpreter and can each have a core. publish() only counts a Batch's
datagrams and copies it into a ring in shared memory (ethdaq.host.pubring, room for
`queue_datagrams` datagrams of a 1500-byte MTU); a Batch that does not fit is counted unpublished
at once (queue_full). The publishing process takes the Batches in order, builds the se00 messages
(ethdaq.host.se00: a prebuilt FlatBuffers template) and hands them to librdkafka, whose queue is
bounded too (queue.buffering.max.messages, queue.buffering.max.kbytes): a message that does not
fit is counted unpublished (buffer_full). Delivery reports are checked: a failed delivery is
unpublished. The process's counters come back a few times a second (tick()) and, final, at
close(), which lets it empty the ring and librdkafka deliver for up to `flush_timeout` seconds;
what is left then is counted unpublished (failed) and purged. If the process ends without its
final counters, what it had not reported is counted failed. After close(), for every stream,
received = published + unpublished.

The publishing process never outlives the receiver: it ignores SIGINT and SIGTERM (the receiver
ends the run) and exits when the receiver's process has gone (ethdaq.host.pubworker).
"""

import ipaddress
import json
import os
import pickle
import socket
import subprocess
import sys
import time
import uuid
from multiprocessing.connection import Connection
from dataclasses import asdict, dataclass

import numpy as np

from ethdaq.host.batch import PACKET_DTYPE, stream_key, stream_name
from ethdaq.wire.protocol import EVENT_ID_BITS_MAX
from ethdaq.host.pubring import RingWriter

DEFAULT_TOPIC = "ethdaq"
STATUS_INTERVAL_S = 1.0
FLUSH_TIMEOUT_S = 10.0     # close(): how long queued messages may still take to be delivered.
QUEUE_DATAGRAMS = 65536    # The ring's room: ~100 MB of 1472-byte datagrams.
RING_BYTES_PER_DATAGRAM = PACKET_DTYPE.itemsize + 1472   # A datagram of a 1500-byte MTU in the ring.
START_TIMEOUT_S = 60.0     # How long the publishing process may take to start (imports, librdkafka).
COLLECT_S = 0.2            # publish() reads the process's counters at least this often.
NICE = 0                   # The publishing process's niceness above the receiver's (pubworker).
END_GRACE_S = 10.0         # close(): the process's time beyond its flushes to send the final counters.

# librdkafka settings of a publisher unless the user's configuration says otherwise. Idempotence
# keeps each partition's messages in order and once through the retries of a broker restart.
DEFAULTS = {
    "enable.idempotence": True,
    "linger.ms": 5,
    "queue.buffering.max.messages": 200000,
    "queue.buffering.max.kbytes": 262144,     # 256 MiB of messages waiting for the broker
    "compression.type": "none",
}


@dataclass
class ClientErrors:
    """What the Kafka client reported in the publishing process (errors and log lines of level
    warning or worse, and errors of the process itself): how many, the newest."""
    count: int = 0
    last: str = None


class PublishError(Exception):
    """A bad Kafka setting or configuration file, as one line."""


@dataclass
class StreamCounters:
    """One stream's datagrams. received and queue_full are counted by publish(); the others are
    the publishing process's, as it last reported them."""
    received: int = 0       # Datagrams with new data handed to publish().
    published: int = 0      # Delivered: the broker acknowledged them.
    queue_full: int = 0     # Unpublished: the ring to the publishing process had no room for their Batch.
    buffer_full: int = 0    # Unpublished: librdkafka's queue had no room for their message.
    failed: int = 0         # Unpublished: delivery failed, or still queued when close() gave up.
    events: int = 0         # An event channel's events in delivered ev44 messages.
    event_words_discarded: int = 0   # An event channel's words that made no whole event (ethdaq.host.events).

    @property
    def unpublished(self):
        return self.queue_full + self.buffer_full + self.failed

    @property
    def pending(self):
        return self.received - self.published - self.unpublished


def read_config(path):
    """librdkafka settings from a file of `key=value` lines (# comments), like Kafka's own
    client.properties files."""
    settings = {}
    try:
        text = open(path).read()
    except OSError as e:
        raise PublishError(f"cannot read the Kafka configuration {path}: {e.strerror}") from None
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise PublishError(f"{path}:{n}: expected key=value, not {line!r}")
        settings[key.strip()] = value.strip()
    return settings


def event_channels(board_ip, identity):
    """Publisher's `events` for one board: its IDENTIFY (a protocol.Identity) names its event
    channels and the bits of their ids."""
    ip = int(ipaddress.IPv4Address(board_ip))
    return {(ip, channel): bits for channel, bits in identity.event_channels.items()}


def _event_list(events):
    """`events` as the publishing process takes them: [source address, stream id, id bits]."""
    out = []
    for (ip, channel), bits in (events or {}).items():
        if isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= EVENT_ID_BITS_MAX:
            raise PublishError(f"an event channel's id has 1 to {EVENT_ID_BITS_MAX} bits, not {bits!r}")
        out.append([int(ipaddress.IPv4Address(ip)), int(channel), bits])
    return out


def parse_option(text):
    """One `--kafka-option key=value`."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise PublishError(f"a Kafka option is key=value (e.g. compression.type=lz4), not {text!r}")
    return key.strip(), value.strip()



# A stream's key fields (source address, port, stream id) as one little-endian 64-bit number per
# packet record, read in place: they are PACKET_DTYPE's first 8 bytes.
_KEY_FIELDS = ("src_ip", "src_port", "stream_id")
_KEY_VIEW = np.dtype({"names": ["key"], "formats": ["<u8"], "offsets": [0], "itemsize": PACKET_DTYPE.itemsize})
assert [PACKET_DTYPE.fields[f][1] for f in _KEY_FIELDS] == [0, 4, 6] and PACKET_DTYPE.byteorder in "<=|"


def stream_counts(packets):
    """[(stream key, datagrams)] of a Batch's packet records: one comparison when they are all
    one stream, numpy's unique otherwise."""
    k = np.ascontiguousarray(packets).view(_KEY_VIEW)["key"]
    if (k == k[0]).all():
        values, counts = [int(k[0])], [len(k)]
    else:
        values, counts = np.unique(k, return_counts=True)
        values = values.tolist()
    return [(stream_key(v & 0xFFFFFFFF, (v >> 32) & 0xFFFF, v >> 48), int(n)) for v, n in zip(values, counts)]


class Publisher:
    """One producer for one run: publish(batch) for every Batch, tick(stats) as often as convenient
    (status messages go out once a second, the publishing process's counters come back), close()
    at the end. `settings` are librdkafka properties (bootstrap.servers, security.protocol,
    sasl.*, ssl.*, compression.type, batch.size, ...), applied over DEFAULTS; `bootstrap` is
    bootstrap.servers. `queue_datagrams` bounds the ring to the publishing process; `nice` is how
    many steps nicer than this process it runs (0..19). `encoder` is
    the class that builds se00 messages there (ethdaq.host.se00.Encoder; it must be importable by
    name in a new process). `events` names the event channels, published as ev44:
    {(board IPv4 address, stream id): bits of the events' id}, as event_channels() makes it from
    the board's IDENTIFY."""

    def __init__(self, bootstrap, topic=DEFAULT_TOPIC, settings=None, run_name=None, job_id=None,
                 filename="", metadata=None, status_interval=STATUS_INTERVAL_S, flush_timeout=FLUSH_TIMEOUT_S,
                 datagrams_per_message=1, queue_datagrams=QUEUE_DATAGRAMS, encoder=None, nice=NICE, events=None):
        for what, value in (("datagrams per message", datagrams_per_message), ("queue datagrams", queue_datagrams)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise PublishError(f"{what} must be a positive integer, not {value!r}")
        if isinstance(nice, bool) or not isinstance(nice, int) or not 0 <= nice <= 19:
            raise PublishError(f"the publishing process's nice increment is 0..19, not {nice!r}")
        config = dict(DEFAULTS)
        config.update(settings or {})
        config["bootstrap.servers"] = bootstrap
        config.setdefault("client.id", f"ethdaq-recv@{socket.gethostname()}")
        self.datagrams_per_message = datagrams_per_message
        self.queue_datagrams = queue_datagrams
        self.bootstrap = bootstrap
        self.topic = topic
        self.job_id = job_id or str(uuid.uuid4())
        self.run_name = run_name or self.job_id
        self.service_id = f"ethdaq-recv-{socket.gethostname()}-{os.getpid()}"
        self.status_interval = status_interval
        self.flush_timeout = flush_timeout
        self.counters = {}            # stream key -> StreamCounters
        self.control_unpublished = 0  # Status and run messages that were not delivered.
        self._status_refused = 0      # ... of them, status messages the ring had no room to ask for.
        self.errors = ClientErrors()
        self.process_cpu_s = 0.0      # CPU seconds the publishing process used since its start, as it last reported.
        self.process = None           # The publishing process (subprocess.Popen).
        self._final = False           # The process's final counters have come.
        self._ended = False           # The process has ended (found in tick() or close()).
        self._closing = False
        self._closed = False
        self._next_status = time.monotonic() + status_interval
        self._next_collect = 0.0
        conf = {"settings": config, "topic": topic, "job_id": self.job_id, "run_name": self.run_name,
                "service_id": self.service_id, "pid": os.getpid(), "bootstrap": bootstrap, "filename": filename,
                "metadata": metadata or {}, "started_ms": int(time.time() * 1000), "status_interval": status_interval,
                "flush_timeout": flush_timeout, "datagrams_per_message": datagrams_per_message, "encoder": encoder,
                "nice": nice, "events": _event_list(events)}
        self._ring = RingWriter(queue_datagrams * RING_BYTES_PER_DATAGRAM, queue_datagrams)
        self._reports = None
        try:
            self._start(conf)
        except BaseException:
            self._stop_process()
            self._ring.close()
            if self._reports is not None:
                self._reports.close()
            raise

    def _start(self, conf):
        """Starts the publishing process (a new interpreter: no fork of a process with threads and
        sockets) and waits until its producer exists (pl72 queued). It gets the ring's memory and
        index and the counters pipe's write end as file descriptors, and its settings on stdin."""
        r, w = os.pipe()
        self._reports = Connection(r, writable=False)
        try:
            self.process = subprocess.Popen([sys.executable, "-m", "ethdaq.host.pubworker"], stdin=subprocess.PIPE,
                                            stdout=subprocess.DEVNULL, pass_fds=(self._ring.memory, self._ring.index, w))
        finally:
            os.close(w)
        try:
            pickle.dump(sys.path, self.process.stdin)    # First: where conf's classes (encoder) import from.
            pickle.dump((conf, self._ring.memory, self._ring.size, self._ring.index, w), self.process.stdin)
            self.process.stdin.close()
        except BrokenPipeError:
            pass                                         # Its exit code says why, below.
        self._ring.close_reader_fds()
        if not self._reports.poll(START_TIMEOUT_S):
            raise PublishError(f"the publishing process did not start in {START_TIMEOUT_S:.0f} s")
        try:
            first = self._reports.recv()
        except EOFError:
            raise PublishError(f"the publishing process ended at its start (exit code {self.process.wait(5)})") \
                from None
        if "error" in first:
            raise PublishError(first["error"])

    def _alive(self):
        return self.process is not None and self.process.poll() is None

    def _stop_process(self):
        """Kills the publishing process (it ignores SIGTERM), when it has not ended on its own."""
        if self._alive():
            self.process.kill()
            self.process.wait()

    # Data ----------------------------------------------------------------------------------------

    def _stream(self, key):
        c = self.counters.get(key)
        if c is None:
            c = self.counters[key] = StreamCounters()
        return c

    def publish(self, batch):
        """Counts the datagrams of `batch` and puts it in the ring for the publishing process: se00
        messages, one per datagram, or with `datagrams_per_message` one per run of up to that many
        consecutive datagrams of a stream. Never blocks: a Batch that does not fit in the ring is
        counted unpublished (queue_full); with the process ended, it is counted failed."""
        if not len(batch):
            return
        if self._closing:
            raise RuntimeError("publish() after close()")
        groups = stream_counts(batch.packets)
        for key, n in groups:
            self._stream(key).received += n
        if not self._ended and self._ring.put(len(batch), batch.packets, batch.payload):
            if time.monotonic() >= self._next_collect:
                self._collect()
            return
        for key, n in groups:
            if self._ended:
                self.counters[key].failed += n
            else:
                self.counters[key].queue_full += n

    # The publishing process's counters -----------------------------------------------------------

    def _collect(self):
        """Reads what the publishing process reported since the last call; notices its end."""
        self._next_collect = time.monotonic() + COLLECT_S
        try:
            while not self._final and self._reports.poll(0):
                self._take(self._reports.recv())
        except (EOFError, OSError):
            self._process_ended()
        if not self._final and not self._ended and not self._alive():
            self._process_ended()

    def _take(self, report):
        for key, row in report["streams"].items():
            c = self._stream(key)
            c.published, c.buffer_full, c.failed, c.events, c.event_words_discarded = row
        self.control_unpublished = report["control_unpublished"] + self._status_refused
        self.errors.count, self.errors.last = report["client_errors"], report["last_client_error"]
        self.process_cpu_s = report["cpu_s"]
        self._final = report["final"]

    def _process_ended(self):
        """The publishing process has ended without its final counters: what it did not report is
        counted failed (received = published + unpublished holds), the end is a client error."""
        if self._ended or self._final:
            return
        self._ended = True
        try:
            code = self.process.wait(1)
        except subprocess.TimeoutExpired:
            code = None
        self.errors.count += 1
        self.errors.last = f"the publishing process ended without its final counters (exit code {code})"
        for c in self.counters.values():
            c.failed += c.pending

    # Status and run messages ---------------------------------------------------------------------

    def _rows(self, stats):
        """Each stream's receive-loop counters for the publishing process's status messages."""
        rows = []
        for key in sorted(self.counters):
            c = self.counters[key]
            s = {} if stats is None else stats.streams.get(key) or {}
            rows.append([list(key), c.received, c.queue_full, s.get("missing", 0), s.get("duplicates", 0),
                         s.get("board_dropped", 0)])
        return rows

    def _control(self, kind, stats):
        """A control record for the publishing process; False when the ring has no room."""
        body = json.dumps({"kind": kind, "streams": self._rows(stats)}).encode()
        return self._ring.put(0, np.frombuffer(body, np.uint8))

    def tick(self, stats=None):
        """Reads the publishing process's counters; once an interval, asks it for the status
        messages (`stats`: the receive core's RxStats, for its counters). A status that does not
        fit in the ring is not sent and is counted with the undelivered status messages."""
        self._collect()
        if not self._closing and not self._ended and time.monotonic() >= self._next_status:
            self._next_status = time.monotonic() + self.status_interval
            if not self._control("status", stats):
                self._status_refused += len(self.counters)
                self.control_unpublished += len(self.counters)

    def status(self, key, stream_stats=None):
        """The status of one stream as a dict: the receive core's counters (`stream_stats`, one
        of RxStats.streams) and this publisher's, as the status messages carry them."""
        c = self.counters[key]
        s = stream_stats or {}
        return {"stream": stream_name(key), "stream_id": key[2], "received": c.received,
                "lost": s.get("missing", 0), "duplicates": s.get("duplicates", 0),
                "board_dropped": s.get("board_dropped", 0), "published": c.published,
                "unpublished": c.unpublished, "pending": c.pending}

    # End -----------------------------------------------------------------------------------------

    def close(self, stats=None):
        """Lets the publishing process send what the ring holds and waits for the deliveries, for
        up to flush_timeout in all; the rest is counted unpublished; then the process sends the
        final status of every stream and the 6s4t run stop (waiting for them as long again, at most
        5 s), reports its final counters and exits."""
        if self._closed:
            return
        self._closed = self._closing = True
        deadline = time.monotonic() + self.flush_timeout
        self._ring.set_deadline(time.monotonic_ns() + int(self.flush_timeout * 1e9))
        self._collect()
        while not self._ended and not self._control("close", stats):
            self._collect()                  # The ring is full: the process frees it by the deadline.
            if time.monotonic() >= deadline + END_GRACE_S:
                break
            time.sleep(0.01)
        self._ring.close_index()
        end = deadline + min(self.flush_timeout, 5.0) + END_GRACE_S
        while not self._final and not self._ended:
            if self._reports.poll(max(0.0, min(0.5, end - time.monotonic()))):
                self._collect()
            elif time.monotonic() >= end:
                break
            else:
                self._collect()
        if not self._final:
            self._stop_process()
            self._process_ended()
        try:
            self.process.wait(END_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
        self._stop_process()
        self._reports.close()
        self._ring.close()

    def totals(self):
        """Counters over every stream, as a dict (the run summary's `kafka` section)."""
        t = StreamCounters()
        for c in list(self.counters.values()):
            for name, value in asdict(c).items():
                setattr(t, name, getattr(t, name) + value)
        return {"bootstrap_servers": self.bootstrap, "topic": self.topic, "job_id": self.job_id,
                **asdict(t), "unpublished": t.unpublished, "pending": t.pending, "control_unpublished": self.control_unpublished,
                "client_errors": self.errors.count, "last_client_error": self.errors.last,
                "process_cpu_s": self.process_cpu_s}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
