#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""`ethdaq merge`: consumes the se00 and ev44 messages that `ethdaq recv --kafka` publishes for
many boards' streams, gives every sample its PTP time and writes the samples and events in time
slices across all sources into one HDF5 file with NeXus classes (ethdaq.host.mergefile).

    ethdaq merge --kafka 127.0.0.1:9092 --topic detector1 --slice 1ms --watermark 50ms \\
                 -o merged.h5 --until-stop

A sample's time is the message's packet_timestamp plus its index times time_delta (timestamp
location Start; End and Middle shift it; a message that carries per-sample timestamps uses them).
A stream's first message carries time_delta 0 (its period is not known yet); its samples wait
until a later message of the source brings the period.

An ev44 message is a source's events: each event's PTP time is its reference_time (the one whose
reference_time_index range holds it) plus its time_of_flight, its id the pixel_id (-1 when the
message has none), and it keeps the message_id that brought it. Events go through the slices,
the watermark, `late` and the duplicate and gap checks as samples do, each source's in time order
within a slice. Events cut by a loss never reach Kafka: the receivers count their words
(event_words_discarded in their x5f2 status), and the merge sums the newest status of each source.

Slices are [k * W, (k + 1) * W) on the PTP timescale (W = --slice), so every merge cuts the same
slices. The watermark decides when a slice is complete:

    watermark = max(watermark, min(latest(s) for every active source s) - lateness)

latest(s) is the PTP time of the newest sample consumed from source s, lateness is --watermark.
A source is active while its partition is assigned to this consumer and has not reached its end
(the broker's newest message: nothing is waiting for it) and while its latest is less than --idle
behind the newest sample of its partition (a board that stopped sending no longer holds the
others back). While an assigned partition has delivered nothing and not reached its end, no slice
closes. A slice closes when the watermark reaches its end; at the end of the merge every slice
closes. A sample whose slice has closed is late: counted (per source) and written to the file's
`late` group with its time and message_counter, never into a slice.

A message's lag is how far its first sample (or event) lies behind the frontier, watermark +
lateness (the newest time every active source has reached), when it is placed; a message whose
lag is at most the lateness has nothing late. The largest lag, per source and over all, is
counted (`largest_lag_ns`): the lateness a run needed, for choosing --watermark.

A message whose counters (message_counter, and the Kafka header `datagrams` for the range it
covers) were already consumed for its source, with its first sample inside the source's span of
times, is a duplicate: counted, its samples not written again. Counters missing between the
consumed ones are gaps (counted, in datagrams). A message whose counters repeat but whose time
lies beyond the source's span starts the source's counters afresh (a board that restarted its run).
"""

import argparse
import bisect
import functools
import heapq
import json
import sys
import time
import uuid
from pathlib import Path

import numpy as np

from ethdaq.host import argtypes, publisher, se00
from ethdaq.host.pubworker import ClientErrors
from ethdaq.wire.protocol import format_duration_ns, parse_duration_ns

DEFAULT_SLICE = "1ms"
DEFAULT_LATENESS = "50ms"
DEFAULT_IDLE = "10s"
CONNECT_TIMEOUT_S = 10.0   # Broker metadata at start: no answer by then is "brokers unreachable".
POLL_S = 0.2               # The longest wait for messages, so stops are prompt.
POLL_MESSAGES = 1000
RESERVED_GROUPS = ("slices", "late", "runs")   # The file's groups beside the sources (ethdaq.host.mergefile).
EXIT_NO_DATA = 4           # No se00 or ev44 message was consumed.
EXIT_KAFKA = 5             # The brokers could not be reached or refused the consumer.
# What travels with each event through the slices: its id and the message_id that brought it.
EVENT_DTYPE = np.dtype([("event_id", "<i4"), ("message_id", "<i8")])
# The counters of a source of samples (se00) and of one of events (ev44), as the merge names them.
COUNTS = {
    "samples": dict(total="samples", merged="merged_samples", late="late_samples", late_messages="late_messages",
                    duplicates="duplicates", duplicate="duplicate_samples"),
    "events": dict(total="events", merged="merged_events", late="late_events", late_messages="late_event_messages",
                   duplicates="event_duplicates", duplicate="duplicate_events"),
}

# se00 timestamp locations (ess-streaming-data-types' Location): where packet_timestamp lies in the
# message's samples, as a fraction of (samples - 1). Unknown counts as Start.
_LOCATION_SHIFT = {0: 0.0, 1: 0.0, 2: 0.5, 3: 1.0}


class MergeError(Exception):
    """A bad argument or environment, as one line, and the exit status it means."""

    def __init__(self, text, status=2):
        super().__init__(text)
        self.status = status


class _Counters:
    """Message counters of one source: the ranges consumed, merged as they join; the holes between
    them are gaps."""

    def __init__(self):
        self.ranges = []          # Sorted, disjoint [lo, hi).
        self.restart_gaps = 0     # Gaps of counter spaces left behind by restarts.

    def add(self, lo, hi):
        """False when [lo, hi) overlaps what was consumed, else records it."""
        i = bisect.bisect_right(self.ranges, [lo, float("inf")])
        if (i and self.ranges[i - 1][1] > lo) or (i < len(self.ranges) and self.ranges[i][0] < hi):
            return False
        self.ranges.insert(i, [lo, hi])
        for j in (i, i - 1):      # Join with the neighbours it touches.
            if 0 <= j < len(self.ranges) - 1 and self.ranges[j][1] == self.ranges[j + 1][0]:
                self.ranges[j][1] = self.ranges.pop(j + 1)[1]
        return True

    def gaps(self):
        return self.restart_gaps + sum(b[0] - a[1] for a, b in zip(self.ranges, self.ranges[1:]))

    def restart(self):
        self.restart_gaps = self.gaps()
        self.ranges = []


class Source:
    """One se00 source (a stream of one board) as the merge knows it; with `events`, one ev44
    source (its values are EVENT_DTYPE records)."""

    def __init__(self, name, group, channel, dtype, partition, events=False):
        self.name, self.group, self.channel, self.dtype = name, group, channel, dtype
        self.kind = "events" if events else "samples"
        self.keys = COUNTS[self.kind]
        self.partition = partition        # (topic, partition)
        self.period = 0.0                 # ns; 0 until a message carries it
        self.first = self.latest = None   # PTP times of its earliest and newest samples
        self.held = []                    # Messages waiting for the period
        self.counters = _Counters()
        self.status = None                # The newest x5f2 status_json of the source
        self.n = dict(messages=0, counter_restarts=0, largest_lag_ns=0, **{key: 0 for key in self.keys.values()})

    def words_discarded(self):
        """An event source's words of no whole event, from the newest status of its receiver."""
        try:
            return int(json.loads(self.status).get("event_words_discarded", 0)) if self.status else 0
        except (ValueError, TypeError, AttributeError):
            return 0

    def attrs(self):
        own = {"period_ns": self.period} if self.kind == "samples" else \
            {"event_words_discarded": self.words_discarded()}
        return {"channel": self.channel, **own, "topic": self.partition[0],
                "partition": self.partition[1], **self.n, "gaps": self.counters.gaps(),
                "first_time_ns": self.first if self.first is not None else -1,
                "latest_time_ns": self.latest if self.latest is not None else -1,
                "last_status": self.status or ""}

    def span(self, tmin, tmax):
        """Widens the source's span (first to latest) to [tmin, tmax]."""
        self.first = tmin if self.first is None else min(self.first, tmin)
        self.latest = tmax if self.latest is None else max(self.latest, tmax)

    def expected(self, start, end):
        """Samples of the source's period in [start, end) within its span (first to latest);
        None for a source of events (nothing is expected of them)."""
        if self.kind == "events":
            return None
        if self.first is None:
            return 0
        lo, hi = max(start, self.first), min(end, self.latest + 1)
        if hi <= lo:
            return 0
        if not self.period:
            return None
        p = self.period
        return max(0, int(np.ceil((hi - self.first) / p) - np.ceil((lo - self.first) / p)))


def sample_times(ts, delta, location, n, value_ts=None):
    """Each sample's PTP time (int64 ns) of a message of n samples."""
    if value_ts is not None and len(value_ts) == n:
        return np.asarray(value_ts, dtype=np.int64)
    shift = _LOCATION_SHIFT.get(int(location), 0.0) * (n - 1) * delta
    if float(delta).is_integer() and float(shift).is_integer():    # Whole ns: integer arithmetic, the same values.
        times = np.arange(n, dtype=np.int64)
        times *= int(delta)
        times += ts - int(shift)
        return times
    return ts + np.round(np.arange(n) * delta - shift).astype(np.int64)


def ev44_events(m):
    """(times, EVENT_DTYPE records) of a deserialised ev44 message: each event's PTP time is the
    reference_time whose reference_time_index range holds it plus its time_of_flight. ValueError
    for indices that do not fit the events."""
    tof = np.asarray(m.time_of_flight, dtype=np.int64)
    ref = np.asarray(m.reference_time, dtype=np.int64)
    index = np.asarray(m.reference_time_index, dtype=np.int64)
    n = len(tof)
    fits = len(index) == len(ref) and (not len(index) or (
        index[0] == 0 and index[-1] <= n and not (np.diff(index) < 0).any()))
    if not fits or (n and not len(ref)):
        raise ValueError(f"ev44 reference_time_index {index.tolist()[:8]} does not index {n} events")
    ids = np.asarray(m.pixel_id, dtype=np.int32)
    if len(ids) not in (0, n):
        raise ValueError(f"ev44 has {len(ids)} pixel_id for {n} events")
    values = np.zeros(n, EVENT_DTYPE)
    values["event_id"] = ids if len(ids) else -1
    values["message_id"] = m.message_id
    if not n:
        return np.zeros(0, np.int64), values
    times = tof + np.repeat(ref, np.diff(np.append(index, n)))
    return times, values


class Merger:
    """The merge's state: add(message) for every Kafka message, eof(), assigned(), revoked() for
    the consumer's partition events, finish() at the end; closed slices go to `out` (a
    mergefile.MergeFile)."""

    def __init__(self, out, slice_ns, lateness_ns, idle_ns):
        self.out, self.slice_ns, self.lateness_ns, self.idle_ns = out, slice_ns, lateness_ns, idle_ns
        self.sources = {}                 # (name, dtype str) -> Source
        self.groups = set()               # Group names in the file
        self.open = {}                    # slice index -> {group: [(times, values)]}
        self.heap = []                    # open slice indices
        self.watermark = None             # ns; None until it is first computed
        self.assigned, self.delivered, self.at_end = set(), set(), set()
        self.newest = {}                  # partition -> newest sample time in it
        self.runs = {}                    # job_id -> fields
        self.closed_slices = 0
        self.c = dict(consumed_messages=0, se00_messages=0, ev44_messages=0, status_messages=0, run_messages=0,
                      other_messages=0, undecodable_messages=0, held_samples=0, largest_lag_ns=0,
                      **{key: 0 for keys in COUNTS.values() for key in keys.values()})

    # Partitions ----------------------------------------------------------------------------------

    def assign(self, partitions):
        self.assigned |= set(partitions)

    def revoke(self, partitions):
        self.assigned -= set(partitions)
        self._advance()

    def eof(self, partition):
        self.at_end.add(partition)
        self._advance()

    # Messages ------------------------------------------------------------------------------------

    def add(self, msg):
        """One consumed Kafka message (confluent_kafka.Message or alike)."""
        part = (msg.topic(), msg.partition())
        self.c["consumed_messages"] += 1
        self.at_end.discard(part)
        self.delivered.add(part)
        value = msg.value() or b""
        schema = bytes(value[4:8])
        decoders = _decoders()
        if schema not in decoders:
            self.c["other_messages"] += 1
        else:
            try:               # Not a valid FlatBuffer of its schema: counted, never fatal.
                m = decoders[schema](value)
                events = ev44_events(m) if schema == b"ev44" else None
                datagrams = int(dict(msg.headers() or []).get("datagrams", b"1")) \
                    if schema in (b"se00", b"ev44") else 0
            except Exception:
                self.c["undecodable_messages"] += 1
            else:
                if schema == b"se00":
                    self._se00(m, part, max(1, datagrams))
                elif schema == b"ev44":
                    self._ev44(m, part, max(1, datagrams), *events)
                elif schema == b"x5f2":
                    self._status(m)
                else:
                    self._run(schema, m, part)
        self._advance()

    def _se00(self, m, part, datagrams):
        self.c["se00_messages"] += 1
        values = np.asarray(m.values)
        src = self._source(m.name, m.channel, values.dtype, part)
        if not self._counted(src, m.message_counter, datagrams, m.timestamp_unix_ns, len(values)):
            return
        if m.sample_ts_delta:
            src.period = float(m.sample_ts_delta)
            self._release(src)
        item = (m.timestamp_unix_ns, m.ts_location, m.message_counter, values, m.value_ts)
        if not src.period and len(values) > 1 and m.value_ts is None:
            src.held.append(item)       # Placed when the period is known (a later message, or finish()).
            self.c["held_samples"] += len(values)
            ts = m.timestamp_unix_ns
            src.span(ts, ts)
            self._note(src, ts)
            return
        self._place(src, *item)

    def _ev44(self, m, part, datagrams, times, values):
        self.c["ev44_messages"] += 1
        src = self._source(m.source_name, -1, EVENT_DTYPE, part, events=True)
        refs = np.asarray(m.reference_time, dtype=np.int64)
        first = int(refs[0]) if len(refs) else int(times.min()) if len(times) else None
        if first is None:                 # Neither a reference nor an event: nothing to place.
            src.n["messages"] += 1
            return
        if not self._counted(src, m.message_id, datagrams, first, len(times)):
            return
        if len(refs):                     # A datagram without whole events still moves the source on.
            src.span(int(refs.min()), int(refs.max()))
            self._note(src, int(refs.max()))
        self._place_times(src, times, values, m.message_id)

    def _counted(self, src, counter, datagrams, first_time, n):
        """Counts a message of `n` samples or events; False for a duplicate (its counters
        [counter, counter + datagrams) consumed before, its first time within the source's span)."""
        k = src.keys
        src.n["messages"] += 1
        src.n[k["total"]] += n
        self.c[k["total"]] += n
        if not src.counters.add(counter, counter + datagrams):
            if src.first is not None and src.first <= first_time <= src.latest:
                for c in (src.n, self.c):
                    c[k["duplicates"]] += 1
                    c[k["duplicate"]] += n
                return False
            src.n["counter_restarts"] += 1
            src.counters.restart()
            src.counters.add(counter, counter + datagrams)
        return True

    def _release(self, src, period=None):
        held, src.held = src.held, []
        for item in held:
            self.c["held_samples"] -= len(item[3])
            self._place(src, *item, period=period)

    def _source(self, name, channel, dtype, part, events=False):
        key = (name, "ev44" if events else dtype.str)
        src = self.sources.get(key)
        if src is None:
            group = name.replace("/", "_") or "unnamed"
            if group in RESERVED_GROUPS or group in self.groups:
                group = f"{group}_{'events' if events else dtype.name}"
            self.groups.add(group)
            src = self.sources[key] = Source(name, group, channel, dtype, part, events)
            if events:
                self.out.add_event_source(group, {"source": name})
            else:
                self.out.add_source(group, dtype, {"source": name})
        src.partition = part
        return src

    def _note(self, src, t_max):
        self.newest[src.partition] = max(self.newest.get(src.partition, t_max), t_max)

    def _place(self, src, ts, location, counter, values, value_ts, period=None):
        """A message's samples to their open slices, or to `late` where their slice has closed."""
        times = sample_times(ts, src.period if period is None else period, location, len(values), value_ts)
        self._place_times(src, times, values, counter)

    def _place_times(self, src, times, values, counter):
        """Samples or events at `times` to their open slices, or to `late` where their slice has closed."""
        if not len(times):
            return
        # Samples in time order (a period, or timestamps that rise) go to their slices as they are;
        # others are sorted by slice first, and their slices' samples by time when the slice closes.
        ordered = bool((times[1:] >= times[:-1]).all())
        tmin, tmax = (int(times[0]), int(times[-1])) if ordered else (int(times.min()), int(times.max()))
        src.span(tmin, tmax)
        self._note(src, tmax)
        if self.watermark is not None:
            lag = self.watermark + self.lateness_ns - tmin
            for c in (src.n, self.c):
                c["largest_lag_ns"] = max(c["largest_lag_ns"], lag)
        ks = times // self.slice_ns
        # Late: the sample's slice has closed, (k + 1) * W <= watermark, that is k < watermark // W.
        closed = None if self.watermark is None else self.watermark // self.slice_ns
        if ordered:
            late = 0 if closed is None else int(np.searchsorted(ks, closed))
            self._late(src, times[:late], values[:late], counter)
            times, values, ks = times[late:], values[late:], ks[late:]
        else:
            if closed is not None:
                late = ks < closed
                self._late(src, times[late], values[late], counter)
                times, values, ks = times[~late], values[~late], ks[~late]
            order = np.argsort(ks, kind="stable")
            times, values, ks = times[order], values[order], ks[order]
        if not len(ks):
            return
        if ks[0] == ks[-1]:
            self._put(int(ks[0]), src.group, times, values, ordered)
            return
        cuts = np.flatnonzero(np.diff(ks)) + 1
        for k, t, v in zip(ks[np.r_[0, cuts]], np.split(times, cuts), np.split(values, cuts)):
            self._put(int(k), src.group, t, v, ordered)

    def _late(self, src, times, values, counter):
        """Samples or events whose slice has closed, in arrival order: counted, into the file's `late`."""
        if len(times):
            if src.kind == "events":
                self.out.add_late_events(src.group, times, values)
            else:
                self.out.add_late(src.group, times, values, counter)
            for c in (src.n, self.c):
                c[src.keys["late"]] += len(times)
                c[src.keys["late_messages"]] += 1

    def _put(self, k, group, times, values, ordered):
        slot = self.open.get(k)
        if slot is None:
            slot = self.open[k] = {}
            heapq.heappush(self.heap, k)
        slot.setdefault(group, []).append((times, values, ordered))

    def _status(self, s):
        self.c["status_messages"] += 1
        try:
            name = json.loads(s.status_json).get("stream")
        except (ValueError, AttributeError):
            return
        for src in self.sources.values():
            if src.name == name:
                src.status = s.status_json

    def _run(self, schema, m, part):
        self.c["run_messages"] += 1
        if schema == b"pl72":
            self.runs.setdefault(m.job_id, {}).update(
                run_name=m.run_name, start_time_ms=m.start_time, filename=m.filename, broker=m.broker,
                service_id=m.service_id, instrument_name=m.instrument_name, metadata=m.metadata,
                topic=part[0], partition=part[1])
        else:
            self.runs.setdefault(m.job_id, {}).update(stop_time_ms=m.stop_time, stop_service_id=m.service_id)

    def stopped(self):
        """True when a run stop was consumed for every run whose start was consumed (and one at least)."""
        return any("stop_time_ms" in r for r in self.runs.values()) and \
            all("stop_time_ms" in r for r in self.runs.values() if "start_time_ms" in r)

    # Watermark and slices ------------------------------------------------------------------------

    def _active(self, src):
        p = src.partition
        return p in self.assigned and p not in self.at_end and src.latest is not None and \
            src.latest >= self.newest[p] - self.idle_ns

    def _advance(self):
        if any(p not in self.delivered and p not in self.at_end for p in self.assigned):
            return                # A partition not heard from yet: its sources may be behind.
        active = [s.latest for s in self.sources.values() if self._active(s)]
        if not active:
            return
        mark = min(active) - self.lateness_ns
        if self.watermark is None or mark > self.watermark:
            self.watermark = mark
        while self.heap and (self.heap[0] + 1) * self.slice_ns <= self.watermark:
            self._close(heapq.heappop(self.heap))

    def _close(self, k):
        slot = self.open.pop(k)
        start, end = k * self.slice_ns, (k + 1) * self.slice_ns
        rows = []
        for src in sorted(self.sources.values(), key=lambda s: s.group):
            if src.first is None or src.first >= end:
                continue          # No sample yet: the source's records start with its first slice.
            parts = slot.get(src.group, [])
            if parts:
                times = np.concatenate([t for t, _, _ in parts])
                values = np.concatenate([v for _, v, _ in parts])
                if not _in_order(parts):
                    order = np.argsort(times, kind="stable")
                    times, values = times[order], values[order]
            else:
                times, values = np.zeros(0, np.int64), np.zeros(0, src.dtype)
            expected = src.expected(start, end)
            rows.append((src.group, times, values, len(values) if expected is None else expected))
            src.n[src.keys["merged"]] += len(values)
            self.c[src.keys["merged"]] += len(values)
        self.out.add_slice(start, rows)
        self.closed_slices += 1

    def finish(self):
        """The end: held messages are placed (period from their own timestamps, else 0), every
        open slice closes in time order."""
        for src in self.sources.values():
            if src.held:
                self._release(src, period=_held_period(src.held))
        while self.heap:
            self._close(heapq.heappop(self.heap))

    def counters(self):
        sources = self.sources.values()
        gaps = sum(s.counters.gaps() for s in sources if s.kind == "samples")
        event_gaps = sum(s.counters.gaps() for s in sources if s.kind == "events")
        restarts = sum(s.n["counter_restarts"] for s in sources)
        return {**self.c, "gaps": gaps, "event_gaps": event_gaps, "counter_restarts": restarts,
                "sources": sum(s.kind == "samples" for s in sources),
                "event_sources": sum(s.kind == "events" for s in sources),
                "event_words_discarded": sum(s.words_discarded() for s in sources if s.kind == "events"),
                "slices": self.closed_slices}


@functools.cache
def _decoders():
    from streaming_data_types import deserialise_6s4t, deserialise_ev44, deserialise_pl72, deserialise_x5f2
    return {b"se00": se00.decode, b"ev44": deserialise_ev44, b"x5f2": deserialise_x5f2, b"pl72": deserialise_pl72,
            b"6s4t": deserialise_6s4t}


def _in_order(parts):
    """True when the (times, values, ordered) parts, one after another, are in time order."""
    return all(o for _, _, o in parts) and all(a[0][-1] <= b[0][0] for a, b in zip(parts, parts[1:]))


def _held_period(held):
    """The period of messages that all carried time_delta 0: from two consecutive ones."""
    if len(held) >= 2 and held[1][0] > held[0][0] and len(held[0][3]):
        return (held[1][0] - held[0][0]) / len(held[0][3])
    return 0.0


# The command --------------------------------------------------------------------------------------

def _duration(what, positive=True):
    def parse(text):
        try:
            ns = 0 if text.strip() == "0" else parse_duration_ns(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        if positive and ns <= 0:
            raise argparse.ArgumentTypeError(f"{what} must be more than 0, not {text!r}")
        return ns
    return parse


def add_arguments(p):
    p.add_argument("--kafka", metavar="BROKERS", required=True, help="the Kafka brokers (host:port,...)")
    p.add_argument("--topic", action="append", metavar="TOPIC",
                   help=f"a topic to consume (repeat it for more; default {publisher.DEFAULT_TOPIC})")
    p.add_argument("--slice", type=_duration("--slice"), default=parse_duration_ns(DEFAULT_SLICE), metavar="DURATION",
                   help=f"width of the time slices, e.g. 1ms, 250us (default {DEFAULT_SLICE})")
    p.add_argument("--watermark", type=_duration("--watermark", positive=False), metavar="DURATION",
                   default=parse_duration_ns(DEFAULT_LATENESS),
                   help=f"allowed lateness: how far behind the slowest active source a slice closes "
                        f"(default {DEFAULT_LATENESS})")
    p.add_argument("--idle", type=_duration("--idle"), default=parse_duration_ns(DEFAULT_IDLE), metavar="DURATION",
                   help=f"a source this far (PTP time) behind the newest sample of its partition no longer "
                        f"holds slices open (default {DEFAULT_IDLE})")
    p.add_argument("-o", "--output", metavar="FILE.h5", required=True, help="the merged HDF5 (NeXus) file")
    p.add_argument("--overwrite", action="store_true", help="replace FILE.h5 if it exists")
    p.add_argument("--group", metavar="ID",
                   help="Kafka consumer group: merges with the same group share the partitions, each writing "
                        "the slices of its own (default: a group of its own, every partition from the start)")
    end = p.add_mutually_exclusive_group()
    end.add_argument("--duration", type=argtypes.positive("duration", float), metavar="S", help="stop after S seconds")
    end.add_argument("--until-stop", action="store_true",
                     help="stop once every run started (pl72) has stopped (6s4t) and every partition is read")
    p.add_argument("--kafka-config", metavar="FILE", help="librdkafka consumer settings, key=value lines")
    p.add_argument("--kafka-option", action="append", default=[], metavar="KEY=VALUE",
                   help="one librdkafka setting, after --kafka-config's (repeat it)")


EPILOG = """\
examples:
  ethdaq merge --kafka 127.0.0.1:9092 --topic detector1 -o merged.h5 --until-stop
  ethdaq merge --kafka kafka1:9092 --topic det1 --topic det2 --slice 250us -o merged.h5 --duration 60
  ethdaq merge --kafka kafka1:9092 --topic det1 --group merge1 -o part1.h5   # and part2.h5 beside it

exit status: 0 when the merge ran (late samples and events, duplicates and gaps are counted in the
file and the summary line), 2 for a usage error, 4 when no se00 or ev44 message was consumed, 5
when the brokers could not be reached or refused the consumer.
"""


def _consumer(args, errors):
    """The Kafka consumer, connected (brokers answered), subscribed; MergeError(5) otherwise."""
    from confluent_kafka import Consumer, KafkaException
    try:
        settings = publisher.read_config(args.kafka_config) if args.kafka_config else {}
        settings.update(publisher.parse_option(o) for o in args.kafka_option)
    except publisher.PublishError as e:
        raise MergeError(str(e)) from None
    config = {"group.id": args.group or f"ethdaq-merge-{uuid.uuid4().hex}", "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "enable.partition.eof": True, "topic.metadata.refresh.interval.ms": 2000,
              "partition.assignment.strategy": "cooperative-sticky",
              "client.id": "ethdaq-merge", **settings, "bootstrap.servers": args.kafka,
              "logger": errors.logger, "error_cb": errors.error}
    try:
        consumer = Consumer(config)
    except (KafkaException, ValueError, TypeError) as e:
        reason = e.args[0].str() if e.args and hasattr(e.args[0], "str") else str(e)
        raise MergeError(f"Kafka client settings refused: {reason}") from None
    try:
        consumer.list_topics(timeout=CONNECT_TIMEOUT_S)
    except KafkaException as e:
        consumer.close()
        why = errors.last or (e.args[0].str() if e.args and hasattr(e.args[0], "str") else str(e))
        raise MergeError(f"cannot reach the Kafka brokers {args.kafka} within {CONNECT_TIMEOUT_S:g} s: {why}",
                         EXIT_KAFKA) from None
    return consumer


def _consume(consumer, merger, args, stop, errors, err):
    """Messages into the merger until --duration, --until-stop's condition, or a signal."""
    from confluent_kafka import KafkaError

    def assigned(c, ps):          # Incremental (cooperative-sticky): the partitions added.
        merger.assign((p.topic, p.partition) for p in ps)
        say()

    def revoked(c, ps):           # The partitions taken away.
        merger.revoke((p.topic, p.partition) for p in ps)
        say()

    def say():
        err.write(f"partitions assigned: {' '.join(f'{t}[{p}]' for t, p in sorted(merger.assigned))}\n")
        err.flush()

    consumer.subscribe(args.topic, on_assign=assigned, on_revoke=revoked, on_lost=revoked)
    deadline = None if args.duration is None else time.monotonic() + args.duration
    while stop.reason is None:
        if deadline is not None and time.monotonic() >= deadline:
            return "duration"
        if args.until_stop and merger.stopped() and merger.assigned and merger.assigned <= merger.at_end:
            return "run stopped"
        for m in consumer.consume(POLL_MESSAGES, POLL_S):
            e = m.error()
            if e is None:
                merger.add(m)
            elif e.code() == KafkaError._PARTITION_EOF:
                merger.eof((m.topic(), m.partition()))
            elif e.fatal() or e.code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                           KafkaError.GROUP_AUTHORIZATION_FAILED):
                raise MergeError(f"Kafka refused the consumer: {e.str()}", EXIT_KAFKA)
            else:              # A topic not there yet, a broker away: counted, the client retries.
                errors.error(e)
    return stop.reason


def summary_line(counters, args, output):
    c = counters
    text = (f"merged {', '.join(args.topic)}: {c['consumed_messages']} messages ({c['se00_messages']} se00"
            + (f", {c['ev44_messages']} ev44" if c["ev44_messages"] else "") + "), "
            f"{c['samples']} samples of {c['sources']} sources in {c['slices']} slices of "
            f"{format_duration_ns(args.slice)}; late {c['late_samples']} samples ({c['late_messages']} messages), "
            f"duplicates {c['duplicates']} ({c['duplicate_samples']} samples), gaps {c['gaps']}")
    if c["ev44_messages"]:
        text += (f"; events {c['events']} of {c['event_sources']} sources, late {c['late_events']} "
                 f"({c['late_event_messages']} messages), duplicates {c['event_duplicates']} "
                 f"({c['duplicate_events']} events), gaps {c['event_gaps']}, "
                 f"words of no whole event {c['event_words_discarded']}")
    text += f"; largest lag {_lag_text(c['largest_lag_ns'])} (--watermark {format_duration_ns(args.watermark)})"
    return text + f"; wrote {output}"


def _lag_text(ns):
    return f"{ns / 1e6:.3f} ms" if ns >= 1_000_000 else f"{ns / 1e3:.1f} us"


def run(args, out=sys.stdout, err=sys.stderr):
    """`ethdaq merge`. Returns the exit status; raises MergeError for one-line errors."""
    from ethdaq.host import h5file, mergefile
    from ethdaq.host.recv import _Stop
    args.topic = args.topic or [publisher.DEFAULT_TOPIC]
    output = Path(args.output)
    if output.exists() and not args.overwrite:
        raise MergeError(f"{output} exists: choose another name or add --overwrite")
    if not output.parent.is_dir():
        raise MergeError(f"cannot write {output}: directory {output.parent} does not exist")
    errors = ClientErrors()
    consumer = _consumer(args, errors)
    meta = {"brokers": args.kafka, "topics": args.topic, "group": args.group or "", "slice_ns": args.slice,
            "lateness_ns": args.watermark, "idle_ns": args.idle}
    try:
        out_file = mergefile.MergeFile(output, meta, overwrite=args.overwrite)
    except h5file.RunFileError as e:
        consumer.close()
        raise MergeError(str(e)) from None
    merger = Merger(out_file, args.slice, args.watermark, args.idle)
    err.write(f"merging {', '.join(args.topic)} from Kafka {args.kafka} into {output}; Ctrl-C stops\n")
    err.flush()
    stopped_by = "error"
    try:
        with _Stop() as stop:
            stopped_by = _consume(consumer, merger, args, stop, errors, err)
    finally:
        merger.finish()
        counters = {**merger.counters(), "stopped_by": stopped_by, "client_errors": errors.count,
                    "last_client_error": errors.last or ""}
        out_file.close(counters, {s.group: s.attrs() for s in merger.sources.values()}, merger.runs)
        if args.group and stopped_by != "error":
            _commit(consumer, errors)
        consumer.close()
    out.write(summary_line(counters, args, output) + "\n")
    out.flush()
    if not counters["se00_messages"] and not counters["ev44_messages"]:
        err.write(f"warning: no se00 or ev44 message was consumed from {', '.join(args.topic)}: "
                  f"exit status {EXIT_NO_DATA}\n")
        return EXIT_NO_DATA
    return 0


def _commit(consumer, errors):
    """The group's offsets, once the file holds what was consumed."""
    from confluent_kafka import KafkaException
    try:
        consumer.commit(asynchronous=False)
    except KafkaException as e:      # Nothing consumed, or the group moved on: counted.
        errors.error(e.args[0] if e.args else e)
