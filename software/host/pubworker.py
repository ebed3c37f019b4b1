#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""The publishing process: Batches from the ring (ethdaq.host.pubring) to Kafka as se00
messages (ev44 for event channels: ethdaq.host.events), with librdkafka (confluent-kafka). ethdaq.host.publisher.Publisher starts it with
`serve` and is the only thing that talks to it; the message layout is described there.

The process reads the ring's records in order: a Batch is cut into messages, each built from the
se00 template (ethdaq.host.se00) and handed to librdkafka; a control record asks for the status
messages (with the receive loop's counters in it) or for the end of the run. Delivery reports
are served between records. Its counters (per stream: published, buffer_full, failed; the
status and run messages not delivered; the client's errors) go back to the receive loop's
process over a pipe a few times a second and once more, final, when the run has ended.

It runs `nice` steps nicer than the receive loop's process (Publisher's `nice`, default 0):
with a higher niceness, on a machine without spare CPU the CPU goes to receiving first (a
datagram the receiver misses is lost from the run file too, one it does not publish stays in
the file and is counted), at the cost of publishing (docs/scaleout.md has both measured). It leaves the
run to the receive loop's process: SIGINT and SIGTERM are ignored (a Ctrl-C reaches the
whole process group, and a service manager stopping a service signals all its processes: the
receiver ends the run and this process then sends what it holds), and when that process has gone without closing the run (the ring's index
reaches end of file) it gives librdkafka ORPHAN_FLUSH_S to deliver and exits.
"""

import functools
import json
import logging
import os
import pickle
import signal
import socket
import sys
import time
from multiprocessing.connection import Connection

import numpy as np

from ethdaq import __version__
from ethdaq.host.batch import decode_samples, sample_dtype, stream_name
from ethdaq.host.events import Assembler
from ethdaq.host.pubring import KIND_CONTROL, KIND_DATA, KIND_EOF, RingReader
from ethdaq.host.se00 import Encoder

IDLE_POLL_S = 0.02         # The wait for a record; delivery reports are served between.
REPORT_S = 0.2             # How often the counters go back to the receive loop's process.
ORPHAN_FLUSH_S = 2.0       # Delivery time left when the receive loop's process has gone.
RUN_KEY = b"run"


class ClientErrors:
    """What the Kafka client reported: its errors (error_cb) and its log lines of level warning
    or worse, counted, the newest kept."""

    def __init__(self):
        self.count = 0
        self.last = None
        self.logger = logging.getLogger(f"ethdaq.host.pubworker.{id(self)}")
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


class SetupError(Exception):
    """The Kafka client refused its settings, as one line."""


class _Sent:
    """One stream's datagrams as this process counts them; for an event channel, its events
    delivered and the words that made no whole event (ethdaq.host.events)."""
    __slots__ = ("published", "buffer_full", "failed", "events", "assembler")

    def __init__(self):
        self.published = self.buffer_full = self.failed = self.events = 0
        self.assembler = None

    def row(self):
        discarded = self.assembler.discarded_words if self.assembler else 0
        return (self.published, self.buffer_full, self.failed, self.events, discarded)


class Sender:
    """One producer for one run, in the publishing process. `conf` is the dict
    ethdaq.host.publisher.Publisher builds (librdkafka settings, topic, run identity, ...)."""

    def __init__(self, conf):
        from confluent_kafka import KafkaException, Producer
        config = dict(conf["settings"])
        # librdkafka's own log lines (a broker down is one every 100 ms) go to self.errors, which
        # counts them and keeps the newest for the receive loop's display and summary.
        self.errors = ClientErrors()
        config["logger"] = self.errors.logger
        config["error_cb"] = self.errors.error
        try:
            self._producer = Producer(config)
        except (KafkaException, ValueError, TypeError) as e:
            reason = e.args[0].str() if e.args and hasattr(e.args[0], "str") else str(e)
            raise SetupError(f"Kafka client settings refused: {reason}") from None
        self.conf = conf
        self.topic = conf["topic"]
        self.datagrams_per_message = conf["datagrams_per_message"]
        self.flush_timeout = conf["flush_timeout"]
        self.sent = {}                # stream key -> _Sent
        self.control_unpublished = 0  # Status and run messages that were not delivered.
        self._names = {}              # stream key -> name
        self._last = {}               # stream key -> (run, seq, timestamp, sample_count) of the newest datagram
        self._period = {}             # stream key -> sample period, ns
        self._encode = (conf.get("encoder") or Encoder)()
        self._how = {}                # (stream key, datagrams) -> (Kafka key, headers, on_delivery, counters)
        # Event channels: (source address, stream id) -> the bits of their events' id.
        self._event_ids = {(ip, sid): bits for ip, sid, bits in conf.get("events", ())}
        self._control(RUN_KEY, self._run_start())
        self.cpu0 = time.process_time()   # CPU seconds reported: from here, the run's.

    def _stream(self, key):
        c = self.sent.get(key)
        if c is None:
            c = self.sent[key] = _Sent()
            self._names[key] = stream_name(key)
        return c

    # Data ----------------------------------------------------------------------------------------

    def publish(self, batch):
        """One Batch's datagrams to librdkafka; an error on the way is counted with the client's,
        and what was not handed on is counted failed."""
        groups = [(key, batch.select(key)) for key in batch.keys()]
        handed = {}                    # Stream key -> its datagrams handed to librdkafka.
        try:
            self._publish_now(batch, groups, handed)
        except Exception as e:         # A bug here must not end publishing unseen.
            self.errors.count += 1
            self.errors.last = f"publishing process: {e!r}"
            for key, idx in groups:
                self._stream(key).failed += len(idx) - handed.get(key, 0)

    def give_up(self, batch):
        """The run's close deadline has passed: the Batch is counted failed, unsent."""
        for key in batch.keys():
            self._stream(key).failed += len(batch.select(key))

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
            self._stream(key)
            p = batch.packets[idx]
            id_bits = self._event_ids.get((key[0], key[2]))
            if id_bits:
                self._publish_events(key, id_bits, p, samples, handed)
                continue
            if _consecutive(p):
                self._publish_consecutive(key, p, samples, handed)
                continue
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

    def _publish_consecutive(self, key, p, samples, handed):
        """_publish_now for one stream's datagrams that are consecutive (one run, seq + 1 each,
        none late, one sample size): the messages are runs of datagrams_per_message, and each
        message's sample period (the newest measured up to its last datagram) is found with numpy
        rather than datagram by datagram."""
        n, most = len(p), self.datagrams_per_message
        seq, ts, count = p["seq"].tolist(), p["timestamp"].tolist(), p["sample_count"].tolist()
        run, bits, offset = int(p["run"][0]), int(p["sample_bits"][0]), p["offset"].tolist()
        period = [self._sample_period(key, run, seq[0], ts[0], count[0])] * n
        if n > 1:
            stamps = p["timestamp"].astype(np.int64)
            gaps, counts = np.diff(stamps), p["sample_count"][:-1].astype(np.int64)
            valid = np.flatnonzero((counts > 0) & (gaps > 0)) + 1      # datagram k measures from k - 1
            if len(valid):
                values = np.empty(n, np.int64)
                values[0] = period[0]
                values[valid] = np.rint(gaps[valid - 1] / counts[valid - 1])
                newest = np.zeros(n, np.int64)
                newest[valid] = valid
                period = values[np.maximum.accumulate(newest)].tolist()
                self._period[key] = period[-1]
            self._last[key] = (run, seq[-1], ts[-1], count[-1])
        for start in range(0, n, most):
            end = min(n, start + most)
            values = samples(offset[start:end], count[start:end], bits)
            self._send(key, end - start, ts[start], period[end - 1], seq[start], values)
            handed[key] = end

    def _publish_events(self, key, id_bits, p, samples, handed):
        """_publish_now for an event channel: ev44 messages of runs of up to datagrams_per_message
        consecutive datagrams, the events that end in each datagram referred to its timestamp."""
        c, most = self.sent[key], self.datagrams_per_message
        seq, run, late = p["seq"].tolist(), p["run"].tolist(), p["late"].tolist()
        ts, count, dropped = p["timestamp"].tolist(), p["sample_count"].tolist(), p["dropped"].tolist()
        bits, offset = p["sample_bits"].tolist(), p["offset"].tolist()
        start, parts = 0, []
        for k in range(len(p)):
            if c.assembler is None or c.assembler.sample_bits != bits[k]:
                discarded = c.assembler.discarded_words if c.assembler else 0
                c.assembler = Assembler(bits[k], id_bits)
                c.assembler.discarded_words = discarded
            words = samples(offset[k:k + 1], count[k:k + 1], bits[k])
            if late[k]:      # A datagram that filled a gap: its own whole events; the stream's carry stays.
                alone = Assembler(bits[k], id_bits)
                times, ids = alone.feed(words, run[k], seq[k], dropped[k])
                alone.drop_carry()
                c.assembler.discarded_words += alone.discarded_words
            else:
                times, ids = c.assembler.feed(words, run[k], seq[k], dropped[k])
            parts.append((ts[k], times, ids))
            if k + 1 == len(p) or k + 1 - start >= most or late[k + 1] or late[start] \
                    or run[k + 1] != run[start] or seq[k + 1] != seq[k] + 1:
                self._send_events(key, k + 1 - start, seq[start], parts)
                start, parts = k + 1, []
                handed[key] = start

    def _send_events(self, key, n, seq, parts):
        """One ev44 message of `n` consecutive datagrams of an event channel; `parts` is each
        datagram's (timestamp, event times, ids)."""
        from streaming_data_types.eventdata_ev44 import serialise_ev44
        c = self.sent[key]
        ref, index, tof = ev44_times([(t, times) for t, times, _ in parts])
        ids = np.concatenate([i for _, _, i in parts]) if parts else np.zeros(0, np.int32)
        value = serialise_ev44(self._names[key], seq, ref, index, tof, ids)
        try:
            self._producer.produce(self.topic, value, self._names[key].encode(), headers=[("datagrams", str(n))],
                                   on_delivery=functools.partial(self._events_delivered, c, n, len(ids)))
        except BufferError:
            c.buffer_full += n

    @staticmethod
    def _events_delivered(c, n, events, err, msg):
        if err is None:
            c.published += n
            c.events += events
        else:
            c.failed += n

    def _send(self, key, n, timestamp, period, seq, values):
        """One se00 message of `n` consecutive datagrams of one stream."""
        how = self._how.get((key, n))
        if how is None:       # The message's key, headers and delivery report, alike for every n.
            c = self.sent[key]
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

    def poll(self):
        self._producer.poll(0)

    # Status and run messages ---------------------------------------------------------------------

    def _control_delivered(self, err, msg):
        if err is not None:
            self.control_unpublished += 1

    def _control(self, key, value):
        try:
            self._producer.produce(self.topic, value, key, on_delivery=self._control_delivered)
        except BufferError:
            self.control_unpublished += 1

    def _run_start(self):
        from streaming_data_types.run_start_pl72 import serialise_pl72
        c = self.conf
        return serialise_pl72(c["job_id"], c["filename"] or "", start_time=c["started_ms"], run_name=c["run_name"],
                              service_id=c["service_id"], instrument_name="ethdaq", broker=c["bootstrap"],
                              metadata=json.dumps(c["metadata"]))

    def status(self, row):
        """The status of one stream as a dict, from the receive loop's `row` (stream key, received,
        queue_full, lost, duplicates, board_dropped) and this process's counters."""
        key, received, queue_full, lost, duplicates, board_dropped = row
        key = tuple(key)
        c = self.sent.get(key) or _Sent()
        unpublished = queue_full + c.buffer_full + c.failed
        status = {"stream": stream_name(key), "stream_id": key[2], "received": received, "lost": lost,
                  "duplicates": duplicates, "board_dropped": board_dropped, "published": c.published,
                  "unpublished": unpublished, "pending": received - c.published - unpublished}
        if (key[0], key[2]) in self._event_ids:   # An event channel: its events too.
            _, _, _, status["events"], status["event_words_discarded"] = c.row()
        return status

    def send_status(self, rows):
        """One x5f2 message per stream of `rows` (the receive loop's, see status())."""
        from streaming_data_types.status_x5f2 import serialise_x5f2
        c = self.conf
        for row in sorted(rows, key=lambda r: tuple(r[0])):
            status = self.status(row)
            value = serialise_x5f2("ethdaq", __version__, c["service_id"], socket.gethostname(), c["pid"],
                                   int(c["status_interval"] * 1000), json.dumps(status))
            self._control(status["stream"].encode(), value)

    # End -----------------------------------------------------------------------------------------

    def close(self, rows, deadline_ns):
        """Waits for the deliveries until the receive loop's deadline, counts the rest failed, then
        sends the final status of every stream and the 6s4t run stop (waiting for them as long
        again, at most 5 s)."""
        from streaming_data_types.run_stop_6s4t import serialise_6s4t
        self.finish(max(0.0, (deadline_ns - time.monotonic_ns()) / 1e9))
        self.send_status(rows)
        c = self.conf
        self._control(RUN_KEY, serialise_6s4t(c["job_id"], run_name=c["run_name"], service_id=c["service_id"],
                                              stop_time=int(time.time() * 1000)))
        self.finish(min(self.flush_timeout, 5.0))

    def finish(self, timeout):
        self._producer.flush(timeout)
        if len(self._producer):
            self._producer.purge()           # Their delivery reports say "purged": unpublished.
            self._producer.flush(1.0)

    def report(self, final=False):
        """The counters for the receive loop's process, as a dict."""
        return {"streams": {key: c.row() for key, c in self.sent.items()},
                "control_unpublished": self.control_unpublished,
                "client_errors": self.errors.count, "last_client_error": self.errors.last,
                "cpu_s": time.process_time() - self.cpu0, "final": final}


INT32 = (-2**31, 2**31 - 1)


def ev44_times(parts):
    """ev44's reference_time, reference_time_index and time_of_flight for datagrams `parts`, each
    (its header timestamp, its events' times in ns): one reference per datagram, its timestamp,
    and each event's time of flight from it. An event too far from it for ev44's int32 (2.1 s:
    a datagram that stayed open that long) starts a reference of its own, its own time."""
    refs, index, tofs, n = [], [], [], 0
    for stamp, times in parts:
        tof = times.astype(np.int64) - np.int64(stamp)
        refs.append(stamp)
        index.append(n)
        if len(tof) and (tof.min() < INT32[0] or tof.max() > INT32[1]):
            ref, out = stamp, []
            for j, t in enumerate(times.tolist()):
                if not INT32[0] <= t - ref <= INT32[1]:
                    ref = t
                    refs.append(ref)
                    index.append(n + j)
                out.append(t - ref)
            tof = np.array(out, np.int64)
        tofs.append(tof)
        n += len(times)
    tof = np.concatenate(tofs).astype(np.int32) if tofs else np.zeros(0, np.int32)
    return np.array(refs, np.int64), np.array(index, np.int32), tof


def _consecutive(p):
    """True when packet records `p` of one stream are one run of consecutive datagrams: one run,
    seq + 1 each, none late, one sample size."""
    if p["late"].any():
        return False
    if len(p) == 1:
        return True
    return bool((p["run"] == p["run"][0]).all() and (np.diff(p["seq"]) == 1).all()
                and (p["sample_bits"] == p["sample_bits"][0]).all())


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


def main():
    """The publishing process (python -m ethdaq.host.pubworker), as Publisher starts it: on stdin
    sys.path, then (conf, the ring's memory fd, its size, its index fd, the counters pipe's fd)."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    sys.path[:] = pickle.load(sys.stdin.buffer)
    conf, memory, size, index, report = pickle.load(sys.stdin.buffer)
    os.nice(conf["nice"])
    serve(conf, RingReader(memory, size, index), Connection(report, readable=False))


def serve(conf, ring, report):
    """Publishes what `ring` (a RingReader) brings; its counters go to `report` (a Connection)."""
    try:
        sender = Sender(conf)
    except SetupError as e:
        report.send({"error": str(e)})
        return
    try:
        report.send({"ready": True})
        _loop(sender, ring, report)
    except (BrokenPipeError, ConnectionResetError):
        sender.finish(ORPHAN_FLUSH_S)        # The receive loop's process has gone.
    finally:
        ring.close()


def _loop(sender, ring, report):
    next_report = time.monotonic() + REPORT_S
    while True:
        record = ring.next(IDLE_POLL_S)
        if record is not None:
            kind, body, datagrams, end = record
            if kind == KIND_EOF:             # The receive loop's process has gone without closing.
                sender.finish(ORPHAN_FLUSH_S)
                return
            if kind == KIND_DATA:
                deadline = ring.deadline_ns()
                if deadline and time.monotonic_ns() >= deadline:
                    sender.give_up(body)
                else:
                    sender.publish(body)
                ring.release(end, datagrams)
            elif kind == KIND_CONTROL:
                ring.release(end, 0)
                msg = json.loads(body)
                if msg["kind"] == "status":
                    sender.send_status(msg["streams"])
                else:                        # "close": the last record of the run.
                    sender.close(msg["streams"], ring.deadline_ns())
                    report.send(sender.report(final=True))
                    return
        sender.poll()
        if time.monotonic() >= next_report:
            report.send(sender.report())
            next_report = time.monotonic() + REPORT_S


if __name__ == "__main__":
    main()
