#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""The file `ethdaq merge` writes (ethdaq.host.merge): samples and events of many boards' streams,
consumed from Kafka, in time slices by PTP time, in HDF5 with NeXus classes.

Layout (format "ethdaq-merge", format_version 1). Every group and dataset has a `description`
attribute, every dataset `units`; times are PTP times in ns (int64), as the se00 messages give:

    /                        NXroot; attrs: format, format_version, created, closed (ISO 8601 UTC,
                             written by a clean close), default="merged"
    /merged/                 NXentry; attrs: slice_ns, lateness_ns, idle_ns, brokers, topics,
                             group, and the merge's counters (consumed_messages, se00_messages,
                             samples, merged_samples, late_samples, late_messages, duplicates,
                             duplicate_samples, gaps; ev44_messages, events, merged_events,
                             late_events, late_event_messages, event_duplicates, duplicate_events,
                             event_gaps, event_words_discarded, ...: see Merger.counters),
                             summary (JSON);
                             title, entry_identifier, start_time, end_time: from the run start
                             (pl72) and stop (6s4t) messages consumed, when there were any
      slices/                NXlog: one record per closed slice, in time order: time (the slice's
                             start), value (its samples, all sources), events (its events, all
                             sources), sources (how many sources have samples or events in it)
      <source>/              NXdata, one per source (the se00 name, e.g. 192.168.1.50_5001_s0):
                             signal="samples", axes="time"; attrs: channel, period_ns, topic,
                             partition and the source's own counters
        samples              the source's samples in slice order, in time order within a slice
        time                 each sample's PTP time, ns
        slices/              NXlog: one record per slice closed since the source's first sample:
                             time (slice start), value (samples got), expected (samples its
                             period puts in the slice within the source's span), completeness
                             (value / expected; 1 when nothing was expected), first_sample (index
                             of the slice's first sample in ../samples)
      <source>/              NXdata, one per source of events (the ev44 source_name, e.g.
                             192.168.1.50_5001_s2; with `_events` appended when a source of
                             samples has that name): signal="event_id", axes="event_time"; attrs:
                             channel (-1), topic, partition, the source's own counters and
                             event_words_discarded (from its receiver's newest x5f2 status)
        event_time           each event's PTP time, ns: its reference_time plus its time_of_flight
        event_id             each event's id (ev44 pixel_id; -1 when the message had none)
        message_id           the ev44 message_id (the DAQ seq of its first datagram) that brought it
        slices/              NXlog: one record per slice closed since the source's first event:
                             time (slice start), value (events got), first_event (index of the
                             slice's first event in ../event_time)
      late/                  NXcollection: one NXdata per source that sent late samples or events
                             (whose slice had closed when they came): samples, time,
                             message_counter; or event_time, event_id, message_id
      runs/                  NXcollection: one NXcollection per run (pl72 job_id) with its
                             fields as attributes (run_name, start_time_ms, stop_time_ms, ...)
"""

import datetime
import json

import h5py
import numpy as np

from ethdaq.host.h5file import LIBVER, RunFileError, describe, h5_reason, now_iso, set_attrs

FORMAT = "ethdaq-merge"
FORMAT_VERSION = 1
ENTRY = "merged"
CHUNK = 65536                             # Items per chunk of a growing dataset.
FLUSH_ITEMS = 1 << 20                     # Buffered items that make a column write to the file.


class _Column:
    """A 1-D resizable dataset written in large blocks: appended arrays wait in memory."""

    def __init__(self, group, name, dtype, units, description):
        self.ds = group.create_dataset(name, shape=(0,), maxshape=(None,), dtype=dtype, chunks=(CHUNK,))
        describe(self.ds, None, description, units=units)
        self.parts = []
        self.buffered = 0
        self.length = 0           # Items in the file and buffered.

    def append(self, values):
        values = np.asarray(values, dtype=self.ds.dtype)
        if len(values):
            self.parts.append(values)
            self.buffered += len(values)
            self.length += len(values)
        if self.buffered >= FLUSH_ITEMS:
            self.flush()

    def flush(self):
        if not self.parts:
            return
        data = np.concatenate(self.parts)
        n = self.ds.shape[0]
        self.ds.resize((n + len(data),))
        self.ds[n:] = data
        self.parts, self.buffered = [], 0


def _log(group, name, description, fields):
    """An NXlog group with one _Column per (name, dtype, units, description) in `fields`."""
    log = group.create_group(name)
    describe(log, "NXlog", description)
    return {f: _Column(log, f, dtype, units, doc) for f, dtype, units, doc in fields}


class _SourceData:
    def __init__(self, entry, name, dtype, attrs):
        grp = entry.create_group(name)
        describe(grp, "NXdata", f"source {name}: its samples in slice order (time order within a slice) "
                  "with each sample's PTP time; slices: what each slice holds of it",
                  signal="samples", axes="time", time_indices=0, **attrs)
        self.group = grp
        self.samples = _Column(grp, "samples", dtype, "1", "the source's samples as the se00 messages carry "
                               "them (raw values), in slice order and in time order within a slice")
        self.time = _Column(grp, "time", "<i8", "ns", "each sample's PTP time: the message's packet_timestamp "
                            "plus its index times time_delta (ns since 1970 on the PTP timescale)")
        self.slices = _log(grp, "slices", "one record per slice closed since the source's first sample; "
                           "slice i holds samples[first_sample[i]:first_sample[i] + value[i]]", [
                               ("time", "<i8", "ns", "the slice's start, PTP time"),
                               ("value", "<u8", "1", "samples of this source in the slice"),
                               ("expected", "<u8", "1", "samples its period puts in the slice, within "
                                "the source's span (first to newest sample)"),
                               ("completeness", "<f8", "1", "value / expected (1 when nothing was expected)"),
                               ("first_sample", "<u8", "1", "index of the slice's first sample in ../samples")])

    def columns(self):
        return [self.samples, self.time, *self.slices.values()]

    def add(self, start, times, samples, expected):
        got = len(samples)
        self.slices["first_sample"].append([self.samples.length])
        self.samples.append(samples)
        self.time.append(times)
        self.slices["time"].append([start])
        self.slices["value"].append([got])
        self.slices["expected"].append([expected])
        self.slices["completeness"].append([got / expected if expected else 1.0])
        return got, 0


def _event_columns(grp, what):
    return {"event_time": _Column(grp, "event_time", "<i8", "ns", f"each {what}event's PTP time: its ev44 "
                                  "reference_time plus its time_of_flight (ns since 1970 on the PTP timescale)"),
            "event_id": _Column(grp, "event_id", "<i4", "1", f"each {what}event's id: the ev44 pixel_id "
                                "(-1 when the message had none)"),
            "message_id": _Column(grp, "message_id", "<i8", "1", "the ev44 message_id of the message that "
                                  "brought it (the DAQ sequence number of its first datagram)")}


class _EventData:
    def __init__(self, entry, name, attrs):
        grp = entry.create_group(name)
        describe(grp, "NXdata", f"source {name}: its events (ev44) in slice order (time order within a "
                 "slice) with each event's PTP time and the message that brought it; slices: how many "
                 "each slice holds", signal="event_id", axes="event_time", event_time_indices=0, **attrs)
        self.group = grp
        self.cols = _event_columns(grp, "")
        self.slices = _log(grp, "slices", "one record per slice closed since the source's first event; "
                           "slice i holds event_time[first_event[i]:first_event[i] + value[i]]", [
                               ("time", "<i8", "ns", "the slice's start, PTP time"),
                               ("value", "<u8", "1", "events of this source in the slice"),
                               ("first_event", "<u8", "1", "index of the slice's first event in ../event_time")])

    def columns(self):
        return [*self.cols.values(), *self.slices.values()]

    def add(self, start, times, events, expected):
        self.slices["first_event"].append([self.cols["event_time"].length])
        self.cols["event_time"].append(times)
        self.cols["event_id"].append(events["event_id"])
        self.cols["message_id"].append(events["message_id"])
        self.slices["time"].append([start])
        self.slices["value"].append([len(events)])
        return 0, len(events)


class MergeFile:
    """Writing one merge: add_slice() for every closed slice, add_late() for late samples,
    close() with the counters and runs at the end. Raises RunFileError (one line)."""

    def __init__(self, path, meta, overwrite=False):
        self.path = path
        try:
            h5 = h5py.File(path, "w" if overwrite else "w-", libver=LIBVER)
        except (OSError, FileExistsError) as e:
            raise RunFileError(f"cannot create {path}: {h5_reason(e)}") from None
        self._h5 = h5
        describe(h5, "NXroot", "time slices across many sources' samples and events by PTP time "
                  "(ethdaq merge), consumed from Kafka se00 and ev44 messages", format=FORMAT, format_version=FORMAT_VERSION,
                  created=now_iso(), default=ENTRY)
        self.entry = h5.create_group(ENTRY)
        describe(self.entry, "NXentry", "the merge: one NXdata group per source, the slices (NXlog), "
                  "late samples and the runs consumed", **meta)
        self.slices = _log(self.entry, "slices", "one record per closed slice with samples, in time order", [
            ("time", "<i8", "ns", "the slice's start, PTP time"),
            ("value", "<u8", "1", "samples in the slice, all sources"),
            ("events", "<u8", "1", "events in the slice, all sources"),
            ("sources", "<u4", "1", "sources with samples or events in the slice")])
        self.late_group = self.entry.create_group("late")
        describe(self.late_group, "NXcollection", "samples and events that came after their slice had "
                  "closed (behind the watermark), one NXdata per source; kept here, never in a slice")
        self.sources = {}     # name -> _SourceData or _EventData
        self.late = {}        # name -> {column: _Column}
        h5.flush()

    def add_source(self, name, dtype, attrs):
        self.sources[name] = _SourceData(self.entry, name, dtype, attrs)

    def add_event_source(self, name, attrs):
        self.sources[name] = _EventData(self.entry, name, attrs)

    def add_slice(self, start, rows):
        """One closed slice: rows = [(source name, times, samples or events, expected)], every
        source known (events: ethdaq.host.merge.EVENT_DTYPE records; their expected is unused)."""
        samples = events = used = 0
        for name, times, values, expected in rows:
            got, got_events = self.sources[name].add(start, times, values, expected)
            samples += got
            events += got_events
            used += got + got_events > 0
        self.slices["time"].append([start])
        self.slices["value"].append([samples])
        self.slices["events"].append([events])
        self.slices["sources"].append([used])

    def add_late(self, name, times, samples, counter):
        cols = self.late.get(name)
        if cols is None:
            grp = self.late_group.create_group(name)
            describe(grp, "NXdata", f"late samples of {name}, in arrival order", signal="samples", axes="time",
                      time_indices=0)
            cols = self.late[name] = {
                "samples": _Column(grp, "samples", samples.dtype, "1", "the late samples as the messages carry them"),
                "time": _Column(grp, "time", "<i8", "ns", "each late sample's PTP time"),
                "message_counter": _Column(grp, "message_counter", "<i8", "1",
                                           "the se00 message_counter of the message that brought it")}
        cols["samples"].append(samples)
        cols["time"].append(times)
        cols["message_counter"].append(np.full(len(samples), counter, dtype="<i8"))

    def add_late_events(self, name, times, events):
        cols = self.late.get(name)
        if cols is None:
            grp = self.late_group.create_group(name)
            describe(grp, "NXdata", f"late events of {name}, in arrival order", signal="event_id",
                     axes="event_time", event_time_indices=0)
            cols = self.late[name] = _event_columns(grp, "late ")
        cols["event_time"].append(times)
        cols["event_id"].append(events["event_id"])
        cols["message_id"].append(events["message_id"])

    def _flush(self):
        for s in self.sources.values():
            for c in s.columns():
                c.flush()
        for cols in [self.slices, *self.late.values()]:
            for c in cols.values():
                c.flush()

    def close(self, counters, sources, runs):
        """Writes what is buffered, the counters (entry attributes), each source's attributes
        (`sources`: name -> dict), the runs (job_id -> dict) and `closed`; closes the file."""
        if self._h5 is None:
            return
        try:
            self._flush()
            set_attrs(self.entry, counters)
            self.entry.attrs["summary"] = json.dumps(counters)
            for name, attrs in sources.items():
                set_attrs(self.sources[name].group, attrs)
            self._write_runs(runs)
            if self.sources:
                self.entry.attrs["default"] = sorted(self.sources)[0]
            self._h5.attrs["closed"] = now_iso()
        finally:
            h5, self._h5 = self._h5, None
            h5.close()

    def _write_runs(self, runs):
        grp = self.entry.create_group("runs")
        describe(grp, "NXcollection", "the runs whose start (pl72) or stop (6s4t) messages were consumed, "
                  "one subgroup per job_id, the messages' fields as attributes")
        for job_id, fields in runs.items():
            describe(grp.create_group(job_id.replace("/", "_")), "NXcollection", f"run {job_id}", **fields)
        if not runs:
            return
        starts = [r["start_time_ms"] for r in runs.values() if "start_time_ms" in r]
        stops = [r["stop_time_ms"] for r in runs.values() if "stop_time_ms" in r]
        self.entry["title"] = ", ".join(sorted({str(r.get("run_name", "")) for r in runs.values()}))
        self.entry["entry_identifier"] = ", ".join(sorted(runs))
        if starts:
            self.entry["start_time"] = _iso_ms(min(starts))
        if stops:
            self.entry["end_time"] = _iso_ms(max(stops))


def _iso_ms(ms):
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).isoformat(timespec="milliseconds")
