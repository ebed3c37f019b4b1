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

Kafka slow or down never stalls the receiver: publish() only counts a Batch's datagrams and puts
it in a bounded queue (QUEUE_DATAGRAMS datagrams); a Batch that does not fit is counted
unpublished at once (queue_full). A thread of the publisher's own takes Batches from the queue,
builds the se00 messages (ethdaq.host.se00: a prebuilt FlatBuffers template) and hands them to
librdkafka, whose queue is bounded too (queue.buffering.max.messages, queue.buffering.max.kbytes):
a message that does not fit is counted unpublished (buffer_full). Delivery reports are checked: a
failed delivery is unpublished. close() lets the thread empty the queue and librdkafka deliver
for up to `flush_timeout` seconds; what is left then is counted unpublished (failed) and purged.
After close(), for every stream, received = published + unpublished.
"""

import collections
import functools
import json
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import asdict, dataclass

from ethdaq import __version__
import numpy as np

from ethdaq.host.batch import decode_samples, sample_dtype, stream_name
from ethdaq.host.se00 import Encoder

DEFAULT_TOPIC = "ethdaq"
STATUS_INTERVAL_S = 1.0
FLUSH_TIMEOUT_S = 10.0     # close(): how long queued messages may still take to be delivered.
QUEUE_DATAGRAMS = 65536    # The publishing thread's queue: ~100 MB of 1472-byte datagrams.
IDLE_POLL_S = 0.02         # The publishing thread's wait for work; delivery reports are served between.
RUN_KEY = b"run"

# librdkafka settings of a publisher unless the user's configuration says otherwise. Idempotence
# keeps each partition's messages in order and once through the retries of a broker restart.
DEFAULTS = {
    "enable.idempotence": True,
    "linger.ms": 5,
    "queue.buffering.max.messages": 200000,
    "queue.buffering.max.kbytes": 262144,     # 256 MiB of messages waiting for the broker
    "compression.type": "none",
}


class ClientErrors:
    """What the Kafka client reported: its errors (error_cb) and its log lines of level warning
    or worse, counted, the newest kept."""

    def __init__(self):
        self.count = 0
        self.last = None
        self.logger = logging.getLogger(f"ethdaq.host.publisher.{id(self)}")
        self.logger.propagate = False
        self.logger.setLevel(logging.WARNING)
        self.logger.addHandler(_Keep(self))

    def error(self, err):
        self.count += 1
        self.last = err.str() if hasattr(err, "str") else str(err)


class _Keep(logging.Handler):
    def __init__(self, errors):
        super().__init__(logging.WARNING)
        self.errors = errors

    def emit(self, record):
        self.errors.count += 1
        self.errors.last = record.getMessage()


class PublishError(Exception):
    """A bad Kafka setting or configuration file, as one line."""


@dataclass
class StreamCounters:
    """One stream's datagrams. Each field has one writer: received and queue_full the thread
    calling publish(), the others the publishing thread (and close() once it has ended)."""
    received: int = 0       # Datagrams with new data handed to publish().
    published: int = 0      # Delivered: the broker acknowledged them.
    queue_full: int = 0     # Unpublished: the publishing thread's queue had no room for their Batch.
    buffer_full: int = 0    # Unpublished: librdkafka's queue had no room for their message.
    failed: int = 0         # Unpublished: delivery failed, or still queued when close() gave up.

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


def parse_option(text):
    """One `--kafka-option key=value`."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise PublishError(f"a Kafka option is key=value (e.g. compression.type=lz4), not {text!r}")
    return key.strip(), value.strip()


class Publisher:
    """One producer for one run: publish(batch) for every Batch, tick(stats) as often as convenient
    (status messages go out once a second), close() at the end. `settings` are librdkafka
    properties (bootstrap.servers, security.protocol, sasl.*, ssl.*, compression.type,
    batch.size, ...), applied over DEFAULTS; `bootstrap` is bootstrap.servers. `queue_datagrams`
    bounds the publishing thread's queue."""

    def __init__(self, bootstrap, topic=DEFAULT_TOPIC, settings=None, run_name=None, job_id=None,
                 filename="", metadata=None, status_interval=STATUS_INTERVAL_S, flush_timeout=FLUSH_TIMEOUT_S,
                 datagrams_per_message=1, queue_datagrams=QUEUE_DATAGRAMS):
        from confluent_kafka import KafkaException, Producer
        config = dict(DEFAULTS)
        config.update(settings or {})
        config["bootstrap.servers"] = bootstrap
        config.setdefault("client.id", f"ethdaq-recv@{socket.gethostname()}")
        # librdkafka's own log lines (a broker down is one every 100 ms) go to self.errors, which
        # counts them and keeps the newest for the live display and the summary, never to stderr.
        self.errors = ClientErrors()
        config["logger"] = self.errors.logger
        config["error_cb"] = self.errors.error
        for what, value in (("datagrams per message", datagrams_per_message), ("queue datagrams", queue_datagrams)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise PublishError(f"{what} must be a positive integer, not {value!r}")
        try:
            self._producer = Producer(config)
        except (KafkaException, ValueError, TypeError) as e:
            reason = e.args[0].str() if e.args and hasattr(e.args[0], "str") else str(e)
            raise PublishError(f"Kafka client settings refused: {reason}") from None
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
        self._control_lock = threading.Lock()
        self._names = {}              # stream key -> name
        self._last = {}               # stream key -> (run, seq, timestamp, sample_count) of the newest datagram
        self._period = {}             # stream key -> sample period, ns
        self._encode = Encoder()
        self._how = {}                # (stream key, datagrams) -> (Kafka key, headers, on_delivery, counters)
        self._queue = collections.deque()   # (batch, [(key, indices)], datagrams)
        self._queued = 0                    # Datagrams in _queue.
        self._work = threading.Condition()
        self._closing = None                # close()'s deadline (time.monotonic()), once it is called.
        self._next_status = time.monotonic() + status_interval
        self._closed = False
        self._started_ms = int(time.time() * 1000)
        self._control(RUN_KEY, self._run_start(filename, metadata or {}))
        self._thread = threading.Thread(target=self._run, name="ethdaq-publisher", daemon=True)
        self._thread.start()

    # Data: the caller's side ---------------------------------------------------------------------

    def _stream(self, key):
        c = self.counters.get(key)
        if c is None:
            c = self.counters[key] = StreamCounters()
            self._names[key] = stream_name(key)
        return c

    def publish(self, batch):
        """Counts the datagrams of `batch` and queues it for the publishing thread: se00 messages,
        one per datagram, or with `datagrams_per_message` one per run of up to that many
        consecutive datagrams of a stream. Never blocks: a Batch that does not fit in the queue is
        counted unpublished (queue_full)."""
        if not len(batch):
            return
        if self._closing is not None:
            raise RuntimeError("publish() after close()")
        groups = [(key, batch.select(key)) for key in batch.keys()]
        for key, idx in groups:
            self._stream(key).received += len(idx)
        with self._work:
            if self._queued + len(batch) <= self.queue_datagrams:
                self._queue.append((batch, groups, len(batch)))
                self._queued += len(batch)
                self._work.notify()
                return
        for key, idx in groups:
            self.counters[key].queue_full += len(idx)

    # Data: the publishing thread -----------------------------------------------------------------

    def _run(self):
        """The publishing thread: Batches from the queue to librdkafka until close(), serving
        delivery reports meanwhile; at close() what it cannot send in time is counted failed."""
        while True:
            with self._work:
                if not self._queue and self._closing is None:
                    self._work.wait(IDLE_POLL_S)
                item = self._queue.popleft() if self._queue else None
                if item is None and self._closing is not None:
                    break
            if item is not None:
                batch, groups, n = item
                handed = {}                    # Stream key -> its datagrams handed to librdkafka.
                try:
                    self._publish_now(batch, groups, handed)
                except Exception as e:         # A bug here must not end publishing unseen.
                    self.errors.count += 1
                    self.errors.last = f"publishing thread: {e!r}"
                    for key, idx in groups:    # What was not handed on is unpublished, counted.
                        self.counters[key].failed += len(idx) - handed.get(key, 0)
                with self._work:
                    self._queued -= n
                if self._closing is not None and time.monotonic() >= self._closing:
                    self._give_up()
                    break
            self._producer.poll(0)
        self._finish(max(0.0, self._closing - time.monotonic()))

    def _give_up(self):
        """close()'s time is up: what the queue still holds is counted failed."""
        with self._work:
            left, self._queue = self._queue, collections.deque()
            self._queued = 0
        for batch, groups, n in left:
            for key, idx in groups:
                self.counters[key].failed += len(idx)

    def _sample_period(self, key, run, seq, timestamp, count):
        """ns between samples, from this datagram and the one before it of the same run."""
        last = self._last.get(key)
        if last is not None and last[0] == run and seq == last[1] + 1 and last[3] and timestamp > last[2]:
            self._period[key] = round((timestamp - last[2]) / last[3])
        if last is None or (run, seq) > last[:2]:
            self._last[key] = (run, seq, timestamp, count)
        return self._period.get(key, 0)

    def _publish_now(self, batch, groups, handed):
        """Each group's datagrams to librdkafka, as se00 messages; `handed` keeps count per key."""
        most = self.datagrams_per_message
        samples = _Samples(batch)
        for key, idx in groups:
            p = batch.packets[idx]
            seq, run, late = p["seq"].tolist(), p["run"].tolist(), p["late"].tolist()
            ts, count = p["timestamp"].tolist(), p["sample_count"].tolist()
            bits, offset = p["sample_bits"].tolist(), p["offset"].tolist()
            start = 0
            for k in range(len(idx)):
                period = self._sample_period(key, run[k], seq[k], ts[k], count[k])
                if k + 1 == len(idx) or k + 1 - start >= most or late[k + 1] or late[start] \
                        or run[k + 1] != run[start] or seq[k + 1] != seq[k] + 1 or bits[k + 1] != bits[start]:
                    values = samples(offset[start:k + 1], count[start:k + 1], bits[start])
                    self._send(key, k + 1 - start, ts[start], period, seq[start], values)
                    start = handed[key] = k + 1

    def _send(self, key, n, timestamp, period, seq, values):
        """One se00 message of `n` consecutive datagrams of one stream."""
        how = self._how.get((key, n))
        if how is None:       # The message's key, headers and delivery report, alike for every n.
            c = self.counters[key]
            how = self._how[key, n] = (self._names[key].encode(), [("datagrams", str(n))],
                                       functools.partial(self._delivered, c, n), c)
        value = self._encode(self._names[key], key[2], timestamp, period, seq, values)
        try:
            self._producer.produce(self.topic, value, how[0], headers=how[1], on_delivery=how[2])
        except BufferError:
            how[3].buffer_full += n

    @staticmethod
    def _delivered(c, n, err, msg):
        if err is None:
            c.published += n
        else:
            c.failed += n

    # Status and run messages ---------------------------------------------------------------------

    def _control_delivered(self, err, msg):
        if err is not None:
            with self._control_lock:
                self.control_unpublished += 1

    def _control(self, key, value):
        try:
            self._producer.produce(self.topic, value, key, on_delivery=self._control_delivered)
        except BufferError:
            with self._control_lock:
                self.control_unpublished += 1

    def _run_start(self, filename, metadata):
        from streaming_data_types.run_start_pl72 import serialise_pl72
        return serialise_pl72(self.job_id, filename or "", start_time=self._started_ms, run_name=self.run_name,
                              service_id=self.service_id, instrument_name="ethdaq", broker=self.bootstrap,
                              metadata=json.dumps(metadata))

    def status(self, key, stream_stats=None):
        """The status of one stream as a dict: the receive core's counters (`stream_stats`, one
        of RxStats.streams) and this publisher's."""
        c = self.counters[key]
        s = stream_stats or {}
        return {"stream": self._names[key], "stream_id": key[2], "received": c.received,
                "lost": s.get("missing", 0), "duplicates": s.get("duplicates", 0),
                "board_dropped": s.get("board_dropped", 0), "published": c.published,
                "unpublished": c.unpublished, "pending": c.pending}

    def send_status(self, stats=None):
        """One x5f2 message per stream now (`stats`: the receive core's RxStats, for its counters)."""
        from streaming_data_types.status_x5f2 import serialise_x5f2
        for key in sorted(self.counters):
            s = None if stats is None else stats.streams.get(key)
            value = serialise_x5f2("ethdaq", __version__, self.service_id, socket.gethostname(), os.getpid(),
                                   int(self.status_interval * 1000), json.dumps(self.status(key, s)))
            self._control(self._names[key].encode(), value)

    def tick(self, stats=None):
        """Sends the status messages when one interval has passed (the publishing thread serves
        the delivery reports)."""
        if self._closing is None and time.monotonic() >= self._next_status:
            self._next_status = time.monotonic() + self.status_interval
            self.send_status(stats)

    # End -----------------------------------------------------------------------------------------

    def close(self, stats=None):
        """Lets the publishing thread send what its queue holds and waits for the deliveries, for up
        to flush_timeout in all; counts the rest unpublished, then sends the final status of every
        stream and the 6s4t run stop (waiting for them as long again, at most 5 s)."""
        if self._closed:
            return
        self._closed = True
        from streaming_data_types.run_stop_6s4t import serialise_6s4t
        with self._work:
            self._closing = time.monotonic() + self.flush_timeout
            self._work.notify()
        self._thread.join()
        self.send_status(stats)
        self._control(RUN_KEY, serialise_6s4t(self.job_id, run_name=self.run_name, service_id=self.service_id,
                                              stop_time=int(time.time() * 1000)))
        self._finish(min(self.flush_timeout, 5.0))

    def _finish(self, timeout):
        self._producer.flush(timeout)
        if len(self._producer):
            self._producer.purge()           # Their delivery reports say "purged": unpublished.
            self._producer.flush(1.0)

    def totals(self):
        """Counters over every stream, as a dict (the run summary's `kafka` section)."""
        t = StreamCounters()
        for c in list(self.counters.values()):
            for name, value in asdict(c).items():
                setattr(t, name, getattr(t, name) + value)
        return {"bootstrap_servers": self.bootstrap, "topic": self.topic, "job_id": self.job_id,
                **asdict(t), "unpublished": t.unpublished, "pending": t.pending, "control_unpublished": self.control_unpublished,
                "client_errors": self.errors.count, "last_client_error": self.errors.last}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _Samples:
    """The samples of a Batch's datagrams as native unsigned integers. When every datagram has
    the same whole-byte sample size, the Batch's payload is converted from big-endian once and a
    datagram's samples are a slice of it; otherwise each message's are decoded on their own."""

    def __init__(self, batch):
        self.payload = batch.payload
        self.native = None
        bits = batch.packets["sample_bits"]
        dt = sample_dtype(int(bits[0])) if len(bits) else None
        if dt is not None and (bits == bits[0]).all() and not (batch.packets["offset"] % dt.itemsize).any():
            self.size = dt.itemsize
            raw = self.payload[:len(self.payload) - len(self.payload) % self.size]
            self.native = raw.view(dt).astype(dt.newbyteorder("="))

    def __call__(self, offsets, counts, bits):
        """The samples of the datagrams at `offsets` (each `counts` samples of `bits`), in order."""
        if self.native is not None:
            parts = [self.native[o // self.size:o // self.size + c] for o, c in zip(offsets, counts)]
        else:
            size = bits // 8
            parts = [decode_samples(self.payload[o:o + c * size], bits) for o, c in zip(offsets, counts)]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)
