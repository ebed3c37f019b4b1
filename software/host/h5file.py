#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Run files: received DAQ data in HDF5, written from `Batch`es and read back as `Batch`es.

    with Writer("run.h5", compression="lzf", meta={"bind": "0.0.0.0", "port": 5000}) as w:
        for batch in batches:          # ethdaq.host.batch.Batch, live or crafted
            w.write(batch)
        w.close(summary=stats)         # optional: the run summary (a JSON-able dict)
    write_summary_json("run.h5", stats)  # run.json beside it, written atomically

    with open_run("run.h5") as run:
        for name, info in run.streams.items():
            print(name, info.sample_bits, info.n_packets, run.samples(name)[:10])
        for batch in run.iter_batches():  # the same type the live receiver yields
            ...

Layout (format "ethdaq-run", format_version 2, NeXus classes; docs/files.md says the same for
people). Every group and dataset has a `description` attribute, every dataset `units`:

    /                        NXroot; attrs: format="ethdaq-run", format_version=2, run_uuid (uuid4,
                             this file's run id), created (ISO 8601 UTC), default="streams",
                             the writer's meta (scalars as they are, anything else as JSON),
                             closed (ISO 8601 UTC, written by a clean close()),
                             summary (JSON string, written by close(summary))
    /streams/                NXentry; attrs: run_uuid, default (the first stream)
      board/                 NXcollection: the board's replies, one NXcollection per reply
                             (identify, config, status_at_start, ...; `ethdaq recv --board-ip`) with
                             its fields as attributes, written by Writer.set_board; none when nobody
                             asked the board
      <name>/                NXdata, one per stream and sample width; attrs: signal="samples",
                             axes=".", src_ip (dotted str), src_port, stream_id, sample_bits,
                             board_runs (the board's run numbers seen), timestamps_ptp_at_start
        samples              1-D native unsigned ints (uint8/16/32/64; 24 bits widened to uint32,
                             40..56 to uint64), resizable, optional compression
        packets/             NXlog: one record per datagram in arrival order, one 1-D dataset per
                             field of PACKETS_DTYPE (units and meaning in PACKET_FIELD_ATTRS);
                             time and value are hard links to timestamp and dropped. first_sample
                             is the index of the datagram's first sample in `samples` (samples are
                             stored back to back, so packet i holds
                             samples[first_sample[i]:first_sample[i] + sample_count[i]])
        events/              NXcollection, only for a channel of events (Writer's `events`: the
                             boards' IDENTIFY): its samples are the events' words, and these are
                             the events rebuilt from them (ethdaq.host.events.reassemble, as the
                             ev44 publisher rebuilds them): event_time (PTP ns, int64), event_id
                             (int32), packet (index in packets of the datagram the event ends
                             in); attrs: id_bits, words_per_event, words_discarded (words of no
                             whole event), words_pending (an unfinished event at the last flush;
                             0 after a clean close, which counts them discarded)

Datasets are chunked to what their stream brought before it was first written (up to CHUNK_BYTES
of samples and PACKETS_CHUNK records): a run of a few datagrams makes a file of a few tens of kB
a stream, a long one large chunks. A stream first enters the file at the first timed flush at
least flush_interval after its first datagram (or at a full buffer, flush() or close()), so its
chunks follow its rate, not the moment the timer fired.

<name> is `batch.stream_name(key)`, e.g. '192.168.1.50_5001_s0'. If a stream's sample_bits
changes within a file (a board reconfigured between runs), the datagrams with the new width go to
a second group named '<name>_<bits>bit' (e.g. '192.168.1.50_5001_s0_24bit'), so every group has
one sample width and `samples` stays one plain array. Going back to the first width goes back to
the first group.

Writing is amortised: write() only sorts a batch into per-stream buffers in memory; flush()
appends them to the file in large blocks and flushes HDF5. It runs when the buffers hold
`buffer_bytes` or `flush_interval` seconds have passed since the last flush (checked at each
write(); write an empty Batch to check the timer while no data arrives). The file is modified
only inside flush(), and every flush ends with H5Fflush, so between flushes the file on disk is
complete and consistent: a process killed outright (SIGKILL, power loss after the OS wrote its
cache) leaves a file that opens and holds everything up to the last flush (except a stream younger
than flush_interval at that flush, see above), without `summary` and `closed`. A kill during a flush itself can leave a damaged file (1 in 100 random kills of a
writer flushing every 50 ms did: its last chunk lay past the end of file HDF5 had recorded). The file uses the HDF5 1.8 format
(libver v108) on purpose: the 1.10 format (superblock v3) marks a file open for writing and then
refuses to open it after a crash until `h5clear -s` is run on it.

close() is safe to call twice and from a `finally` block, also after an exception (or a
KeyboardInterrupt raised by a signal handler) that interrupted write() or flush(): the buffers are
only marked written after the data is in the file, and a repeated flush writes the same data to the
same place.
"""

import dataclasses
import datetime
import ipaddress
import json
import os
import time
import uuid
from pathlib import Path
from typing import NamedTuple

import h5py
import numpy as np

from ethdaq.host import events as event_words
from ethdaq.host.batch import PACKET_DTYPE, Batch, stream_name
from ethdaq.wire import daqformat

FORMAT         = "ethdaq-run"
FORMAT_VERSION = 2
READ_VERSIONS  = (1, 2)  # 1: packets as one record dataset, no NeXus classes, no run_uuid or board.
LIBVER         = ("v108", "v108")  # See the module docstring: no superblock v3, so crashes stay readable.

# One record per datagram in /streams/<name>/packets. Packed, in this order (the file's layout).
PACKETS_DTYPE = np.dtype([
    ("seq",          "<u8"),
    ("run",          "<u4"),
    ("timestamp",    "<u8"),   # ns (PTP time if flags & FLAG_TS_PTP).
    ("flags",        "<u2"),
    ("sample_count", "<u4"),
    ("dropped",      "<u8"),   # Cumulative samples the board dropped for this stream in this run.
    ("rx_time_ns",   "<u8"),
    ("late",         "u1"),
    ("first_sample", "<u8"),   # Index of this datagram's first sample in `samples`.
])
_COPIED_FIELDS = ["seq", "run", "timestamp", "flags", "sample_count", "dropped", "rx_time_ns", "late"]

DEFAULT_BUFFER_BYTES   = 64 * 2**20  # ~60 ms at 1 GB/s: large writes, bounded memory.
DEFAULT_FLUSH_INTERVAL = 1.0         # Seconds: the most a hard kill loses (a new stream's: two).
CHUNK_BYTES            = 2**20       # Largest chunk of samples (~1 MiB): large I/O, compression per MiB.
PACKETS_CHUNK          = 16384       # Largest chunk of a packets field, in records (128 KiB of u8).
MIN_CHUNK              = 64          # Smallest chunk, in items.
EVENT_BLOCK            = 4096        # Datagrams of a channel of events rebuilt at once (bounds a flush's memory).
COMPRESSIONS           = (None, "gzip", "lzf")
RESERVED_ATTRS         = ("format", "format_version", "created", "closed", "summary", "run_uuid",
                          "NX_class", "default", "description")
ENTRY                  = "streams"   # The NXentry: one NXdata group per stream, and `board`.
BOARD                  = "board"     # NXcollection: the board's replies at run start, by whoever asked.

_WIRE = {f.name: f.doc for f in daqformat.FIELDS}
_FLAGS_TEXT = "; ".join(f"0x{bit:04X} {name}: {daqformat.FLAG_DOCS[name]}"
                        for name, bit in sorted(daqformat.FLAGS.items(), key=lambda kv: kv[1]))
# (units, description) of every packets field; header fields described by the wire format's table.
PACKET_FIELD_ATTRS = {
    "seq":          ("1", _WIRE["seq"]),
    "run":          ("1", _WIRE["run"] + "; restarts when the board reboots (the file's run_uuid does not)"),
    "timestamp":    ("ns", _WIRE["timestamp"] + ". PTP time is the board's PTP clock: seconds x 10^9 + ns "
                     "on the PTP timescale (TAI since 1970-01-01 when its grandmaster keeps TAI); "
                     "without TS_PTP, ns since the board's reset"),
    "flags":        ("1", "bit mask, daqformat FLAG_* bits: " + _FLAGS_TEXT),
    "sample_count": ("1", _WIRE["sample_count"]),
    "dropped":      ("1", _WIRE["dropped"] + "; a count of samples, per board run, never reset within a run"),
    "rx_time_ns":   ("ns", "host time the receiver read the datagram: CLOCK_REALTIME, ns since "
                     "1970-01-01T00:00:00 UTC (Unix time; with kernel timestamps, the kernel's arrival time)"),
    "late":         ("1", "1: arrived after a higher seq and filled its gap; 0: in order"),
    "first_sample": ("1", "index of this datagram's first sample in ../samples"),
}
assert list(PACKET_FIELD_ATTRS) == list(PACKETS_DTYPE.names)


class RunFileError(Exception):
    """A run file that cannot be opened, is not a run file, or cannot be created."""


class StreamInfo(NamedTuple):
    name: str          # Group name under /streams.
    key: tuple         # (src_ip int, src_port, stream_id), as batch.stream_key().
    src_ip: str
    src_port: int
    stream_id: int
    sample_bits: int
    n_packets: int
    n_samples: int


def sample_storage_dtype(sample_bits):
    """Native dtype the file stores samples of `sample_bits` bits in (24 -> uint32, 40..56 -> uint64)."""
    if sample_bits <= 0 or sample_bits % 8 or sample_bits > 64:
        raise ValueError(f"sample_bits must be a multiple of 8 in 8..64, not {sample_bits!r}")
    return np.dtype(f"=u{1 << (sample_bits // 8 - 1).bit_length()}")


def now_iso():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


def _gather_into(dest, payload, offsets, counts, nbytes):
    """dest[:] = the big-endian items payload[offsets[i]:offsets[i] + counts[i] * nbytes] for all
    i, back to back, converted to dest's (native) dtype; nbytes is 1, 2, 4 or 8. No Python loop
    per datagram: the live receiver hands over ~10^5..10^6 datagrams a second."""
    offsets = np.asarray(offsets, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.int64)
    if len(offsets) == 0:
        return
    ends = offsets + counts * nbytes
    if offsets.min() < 0 or ends.max() > payload.size:
        # The strided views below do no bounds checking: never let them read past the payload.
        raise ValueError(f"datagram samples must lie inside the payload ({payload.size} bytes), "
                         f"not end at byte {int(ends.max())}")
    wire = np.dtype(f">u{nbytes}")
    if np.array_equal(offsets[1:], ends[:-1]):  # Back to back already: the usual single-stream case.
        dest[...] = payload[offsets[0]:ends[-1]].view(wire)
        return
    # Datagrams of one sample count are rows of a sliding-window view of the payload (row r starts
    # at byte r): one fancy-indexed copy per distinct count, usually one or two (full datagrams and
    # a short last one). Not np.take: it copies the whole (huge) window view first.
    starts = np.zeros(len(counts), dtype=np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    # np.unique costs ~15 us even on 64 values: skip it in the usual case of one count.
    distinct = counts[:1] if (counts == counts[0]).all() else np.unique(counts)
    for count in distinct:
        if count == 0:
            continue
        count = int(count)
        sel = counts == count
        rows = np.ndarray((payload.size - count * nbytes + 1, count), dtype=wire, buffer=payload,
                          strides=(1, nbytes))
        if len(distinct) == 1:
            dest.reshape(-1, count)[...] = rows[offsets]
        else:
            item = dest.itemsize
            window = np.ndarray((dest.size - count + 1, count), dtype=dest.dtype, buffer=dest,
                                strides=(item, item))
            window[starts[sel]] = rows[offsets[sel]]


def _gather(payload, offsets, lengths):
    """payload[offsets[i]:offsets[i] + lengths[i]] for all i, back to back (a new uint8 array)."""
    out = np.empty(int(np.sum(lengths)), dtype=np.uint8)
    _gather_into(out, payload, offsets, lengths, 1)
    return out


def _json_default(value):
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"summary values must be JSON-serialisable, not {type(value).__name__} {value!r}")


def _summary_json(summary):
    if not isinstance(summary, dict):
        raise TypeError(f"summary must be a dict, not {summary!r}")
    return json.dumps(summary, default=_json_default, indent=1, sort_keys=False)


def write_summary_json(path, summary):
    """Write `summary` as JSON beside the run file `path` (run.h5 -> run.json), atomically: a
    reader sees the old file or the whole new one, never a part. Returns the JSON file's path."""
    out = Path(path).with_suffix(".json")
    text = _summary_json(summary) + "\n"
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())  # The rename must not overtake the data on a crash.
        os.replace(tmp, out)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return out


# Writing ------------------------------------------------------------------------------------------

class _Group:
    """A stream group being written: buffers of datagrams not yet in the file, grown as needed.
    `state` is (packets in the file, samples in the file, packets buffered, samples buffered),
    replaced in one assignment after the data is in place, so an interruption (KeyboardInterrupt
    from a signal handler) leaves either the old or the new state, never a mix. A channel of events
    (`id_bits`) has `events`: (packets whose events are in the file, events.State, events in the
    file), likewise replaced in one assignment, before `state`."""
    def __init__(self, name, key, sample_bits, id_bits=None):
        self.name = name
        self.key = key
        self.sample_bits = sample_bits
        self.id_bits = id_bits
        self.events = (0, event_words.State(), 0) if id_bits else None
        self.events_ds = None         # {field: dataset} of events/, created at its first flush.
        self.dtype = sample_storage_dtype(sample_bits)
        self.datasets = None  # (samples, {field: packets dataset}), created at its first flush.
        self.born = time.monotonic()  # When its first datagram was buffered.
        self.runs = set()             # The board's run numbers seen.
        self.runs_written = 0         # len(runs) when board_runs was last written.
        self.state = (0, 0, 0, 0)
        self.packets_buf = np.zeros(0, dtype=PACKET_DTYPE)
        self.samples_buf = np.zeros(0, dtype=self.dtype)

    def reserve(self, packets, samples):
        _, _, pf, sf = self.state
        if pf + packets > len(self.packets_buf):
            new = np.zeros(max(2 * len(self.packets_buf), pf + packets, 1024), dtype=PACKET_DTYPE)
            new[:pf] = self.packets_buf[:pf]
            self.packets_buf = new
        if sf + samples > len(self.samples_buf):
            new = np.empty(max(2 * len(self.samples_buf), sf + samples, 2**16), dtype=self.dtype)
            new[:sf] = self.samples_buf[:sf]
            self.samples_buf = new


class Writer:
    """Appends Batches to a new run file. See the module docstring for the layout and guarantees.

    compression: None, "gzip" or "lzf" (samples and packets). meta: dict of root attributes
    (e.g. {"bind": ..., "port": ..., "command": ...}). overwrite: replace an existing file
    (default: refuse, so a run is never lost to a repeated command line). `run_uuid` is this
    file's random run id (uuid4), also its root attribute. `events` names the channels of events,
    whose events the file keeps beside their words: {(board IPv4 address, stream id): bits of the
    events' id}, as ethdaq.host.publisher.event_channels() makes it from a board's IDENTIFY.
    """

    def __init__(self, path, compression=None, meta=None, overwrite=False,
                 buffer_bytes=DEFAULT_BUFFER_BYTES, flush_interval=DEFAULT_FLUSH_INTERVAL, events=None):
        if compression not in COMPRESSIONS:
            raise ValueError(f"compression must be one of {COMPRESSIONS}, not {compression!r}")
        if not buffer_bytes > 0:
            raise ValueError(f"buffer_bytes must be > 0, not {buffer_bytes!r}")
        if not flush_interval > 0:
            raise ValueError(f"flush_interval must be > 0, not {flush_interval!r}")
        meta = dict(meta or {})
        for k in meta:
            if not isinstance(k, str) or k in RESERVED_ATTRS:
                raise ValueError(f"meta keys must be strings other than {', '.join(RESERVED_ATTRS)}, not {k!r}")
        self.path = Path(path)
        self.compression = compression
        self.event_ids = {(int(ipaddress.IPv4Address(ip)), int(sid)): int(bits)
                          for (ip, sid), bits in (events or {}).items()}
        for bits in self.event_ids.values():
            if not 1 <= bits <= 31:
                raise ValueError(f"an event channel's id has 1 to 31 bits, not {bits}")
        self.buffer_bytes = buffer_bytes
        self.flush_interval = flush_interval
        self._groups = {}   # name -> _Group
        self._names = {}    # (key, sample_bits) -> group name
        self._pending_bytes = 0
        self._h5 = None
        if self.path.exists() and not overwrite:
            raise RunFileError(f"{path} exists: choose another name or overwrite it explicitly")
        try:
            h5 = h5py.File(self.path, "w", libver=LIBVER)
        except OSError as e:
            raise RunFileError(f"cannot create {path}: {h5_reason(e)}") from None
        self.run_uuid = str(uuid.uuid4())
        try:
            describe(h5, "NXroot", "run file of ethdaq (HDF5, NeXus classes): what one receiver "
                      "received from the boards' DAQ streams, one NXdata group per stream in /streams",
                      format=FORMAT, format_version=FORMAT_VERSION, created=now_iso(),
                      run_uuid=self.run_uuid, default=ENTRY)
            set_attrs(h5, meta)
            entry = h5.create_group(ENTRY)
            describe(entry, "NXentry", "the run: one NXdata group per stream (source IP, UDP port, "
                      "stream id), named like 192.168.1.50_5001_s0, and the NXcollection `board`",
                      run_uuid=self.run_uuid)
            describe(entry.create_group(BOARD), "NXcollection",
                      "the board's replies (identify, config, status and ptp at start and end), as attributes "
                      "of subgroups, written by a program that asked the board (Writer.set_board); "
                      "no subgroup: nobody asked. The datagram headers' facts are on each stream group")
            h5.flush()
        except BaseException:
            h5.close()
            raise
        self._h5 = h5
        self._last_flush = time.monotonic()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def closed(self):
        return self._h5 is None

    def set_board(self, section, values):
        """Record a board's reply (a dict or namedtuple, e.g. ctl identify or status) as attributes
        of /streams/board/<section>, replacing an earlier one of that name."""
        if self._h5 is None:
            raise ValueError(f"cannot write to {self.path}: the writer is closed")
        _write_board(self._h5, section, values)
        self._h5.flush()

    @property
    def streams(self):
        """name -> (packets, samples) written so far, buffered ones included."""
        out = {}
        for name, g in self._groups.items():
            p, s, pf, sf = g.state
            out[name] = (p + pf, s + sf)
        return out

    def _group(self, key, sample_bits):
        name = self._names.get((key, sample_bits))
        if name is None:
            name = stream_name(key)
            if name in self._groups:  # This stream already has a group with another width.
                name = f"{name}_{sample_bits}bit"
            sample_storage_dtype(sample_bits)  # Check before registering.
            self._groups[name] = _Group(name, key, sample_bits, self.event_ids.get((key[0], key[2])))
            self._names[(key, sample_bits)] = name
        return self._groups[name]

    def write(self, batch):
        """Buffer a Batch's datagrams per stream; flush when the buffers are full or old enough."""
        if self._h5 is None:
            raise ValueError(f"cannot write to {self.path}: the writer is closed")
        packets, payload = batch.packets, batch.payload
        if packets.dtype != PACKET_DTYPE:
            raise TypeError(f"batch.packets must have dtype batch.PACKET_DTYPE, not {packets.dtype}")
        payload = np.ascontiguousarray(payload)
        if payload.dtype != np.uint8 or payload.ndim != 1:
            raise TypeError(f"batch.payload must be a 1-D uint8 array, not {payload.dtype} {payload.shape}")
        if len(packets):
            # Check the whole batch first, so a bad one is refused whole, not half buffered.
            bits = packets["sample_bits"]
            if ((bits == 0) | (bits % 8 != 0) | (bits > 64)).any():
                bad = int(bits[(bits == 0) | (bits % 8 != 0) | (bits > 64)][0])
                raise ValueError(f"sample_bits must be a multiple of 8 in 8..64, not {bad}")
            ends = packets["offset"] + packets["sample_count"].astype(np.uint64) * (bits // 8)
            if ends.max() > payload.size:
                raise ValueError(f"datagram samples must lie inside the payload ({payload.size} bytes), "
                                 f"not end at byte {int(ends.max())}")
            # One 64-bit value per stream source; sample_bits split further below.
            combined = ((packets["src_ip"].astype(np.uint64) << np.uint64(32)) |
                        (packets["src_port"].astype(np.uint64) << np.uint64(16)) |
                        packets["stream_id"].astype(np.uint64))
            if (combined == combined[0]).all() and (bits == bits[0]).all():
                self._add(packets, payload, None, int(combined[0]), int(bits[0]))
            else:
                one_width = (bits == bits[0]).all()
                for c in np.unique(combined):
                    idx = np.flatnonzero(combined == c)
                    for b in (bits[:1] if one_width else np.unique(bits[idx])):
                        self._add(packets, payload, idx if one_width else idx[bits[idx] == b], int(c), int(b))
        if self._pending_bytes >= self.buffer_bytes:
            self.flush()
        elif time.monotonic() - self._last_flush >= self.flush_interval:
            self._flush(defer_new=True)

    def _add(self, packets, payload, idx, combined, sample_bits):
        key = (combined >> 32, (combined >> 16) & 0xFFFF, combined & 0xFFFF)
        g = self._group(key, sample_bits)
        p = packets if idx is None else packets[idx]
        counts = p["sample_count"].astype(np.int64)
        n = int(counts.sum())
        nbytes = sample_bits // 8
        g.reserve(len(p), n)
        p0, s0, pf, sf = g.state
        g.packets_buf[pf:pf + len(p)] = p
        dest = g.samples_buf[sf:sf + n]
        if nbytes in (1, 2, 4, 8):
            _gather_into(dest, payload, p["offset"], counts, nbytes)
        else:
            dest[...] = _widen(_gather(payload, p["offset"], counts * nbytes), nbytes, g.dtype)
        g.state = (p0, s0, pf + len(p), sf + n)
        self._pending_bytes += n * g.dtype.itemsize + len(p) * PACKETS_DTYPE.itemsize

    def flush(self):
        """Append everything buffered to the file and flush HDF5 (the file is then complete on disk)."""
        self._flush(defer_new=False)

    def _flush(self, defer_new):
        """defer_new: leave out streams not yet in the file whose first datagram is younger than
        the flush interval, so their chunk size (set when created) follows a second of their rate,
        not the moment the timer fired (the timed flush; a full buffer or close() writes all)."""
        if self._h5 is None:
            return
        now = time.monotonic()
        pending = 0
        for g in self._groups.values():
            p0, s0, pf, sf = g.state
            if not pf and g.datasets is not None:
                continue
            if defer_new and g.datasets is None and now - g.born < self.flush_interval:
                pending += sf * g.dtype.itemsize + pf * PACKETS_DTYPE.itemsize
                continue
            buffered = g.packets_buf[:pf]
            if pf:  # The board's run numbers: usually one per flush.
                runs = buffered["run"]
                lo, hi = int(runs.min()), int(runs.max())
                g.runs.update((lo,) if lo == hi else (int(r) for r in np.unique(runs)))
            first = np.empty(pf, dtype=PACKETS_DTYPE["first_sample"])
            if pf:
                first[0] = s0
                np.cumsum(buffered["sample_count"][:-1], out=first[1:])
                first[1:] += np.uint64(s0)
            ds_samples, ds_packets = g.datasets or self._create(g)
            # Resize-and-write is idempotent for the same (p0, s0): an interrupted flush is redone.
            ds_samples.resize((s0 + sf,))
            if sf:
                ds_samples[s0:] = g.samples_buf[:sf]
            for f, ds in ds_packets.items():
                ds.resize((p0 + pf,))
                if pf:
                    ds[p0:] = first if f == "first_sample" else np.ascontiguousarray(buffered[f])
            if len(g.runs) != g.runs_written:
                self._h5[ENTRY][g.name].attrs["board_runs"] = np.array(sorted(g.runs), dtype=np.uint32)
                g.runs_written = len(g.runs)
            if g.events is not None and g.events[0] == p0:
                g.events = self._write_events(g, buffered, g.samples_buf[:sf], p0)
            g.state = (p0 + pf, s0 + sf, 0, 0)
        self._h5.flush()
        self._pending_bytes = pending
        self._last_flush = now

    def _create(self, g):
        """The stream's group and datasets, chunked to what it buffered (its first second or the
        whole of a short run), up to CHUNK_BYTES and PACKETS_CHUNK: a file grows with its data."""
        entry = self._h5[ENTRY]
        if "default" not in entry.attrs:  # What a NeXus reader plots first.
            entry.attrs["default"] = g.name
        grp = entry.require_group(g.name)
        src_ip, src_port, stream_id = g.key
        _, _, pf, sf = g.state
        first_flags = int(g.packets_buf["flags"][0]) if pf else 0
        bits = g.sample_bits
        describe(grp, "NXdata", f"stream {stream_id} of {ipaddress.IPv4Address(src_ip)}:{src_port}: "
                  f"samples (signal) and one record per datagram (packets, NXlog)",
                  signal="samples", axes=".", src_ip=str(ipaddress.IPv4Address(src_ip)), src_port=src_port,
                  stream_id=stream_id, sample_bits=bits,
                  timestamps_ptp_at_start=bool(first_flags & daqformat.FLAG_TS_PTP))
        opts = {"compression": self.compression, "shuffle": self.compression is not None and g.dtype.itemsize > 1}
        # Existing datasets: a flush interrupted after creating them is being redone.
        if "samples" not in grp:
            ds = grp.create_dataset("samples", shape=(0,), maxshape=(None,), dtype=g.dtype,
                                    chunks=(_chunk(sf, CHUNK_BYTES // g.dtype.itemsize),), **opts)
            describe(ds, None, f"the stream's samples back to back, in datagram arrival order, as "
                      f"sent: unsigned {bits}-bit integers (big-endian on the wire), stored as "
                      f"{g.dtype.name}; raw values (ADC codes, emulator counts, front-end words)",
                      units="1", sample_bits=bits, signed=False)
        if "packets" not in grp:
            log = grp.create_group("packets")
            describe(log, "NXlog", "one record per datagram, in arrival order, a field per dataset; "
                      "datagram i holds samples[first_sample[i]:first_sample[i] + sample_count[i]]; "
                      "time is timestamp and value is dropped (hard links)")
            chunk = _chunk(pf, PACKETS_CHUNK)
            for f in PACKETS_DTYPE.names:
                ds = log.create_dataset(f, shape=(0,), maxshape=(None,), dtype=PACKETS_DTYPE[f],
                                        chunks=(chunk,), **opts)
                units, doc = PACKET_FIELD_ATTRS[f]
                describe(ds, None, doc, units=units)
            log["time"] = log["timestamp"]
            log["value"] = log["dropped"]
        samples, log = grp["samples"], grp["packets"]
        g.datasets = (samples, {f: log[f] for f in PACKETS_DTYPE.names})
        return g.datasets

    def _write_events(self, g, packets, samples, p0):
        """The events of a channel of events in the datagrams `packets` (packets p0.. of the
        group) into its events/ datasets; returns the group's new `events` (the old one is kept
        until the data is in place, so a flush redone writes the same events to the same place)."""
        _, state, e0 = g.events
        ds = g.events_ds or self._create_events(g)
        first = 0                   # The block's first sample.
        for a in range(0, max(1, len(packets)), EVENT_BLOCK):
            p = packets[a:a + EVENT_BLOCK]
            n = int(p["sample_count"].sum())
            times, ids, where, state = event_words.reassemble(
                state, samples[first:first + n], p["sample_count"], p["run"], p["seq"], p["dropped"], p["late"],
                g.sample_bits, g.id_bits)
            first += n
            for f, values in (("event_time", times.astype(np.int64)), ("event_id", ids),
                              ("packet", where.astype(np.uint64) + np.uint64(p0 + a))):
                ds[f].resize((e0 + len(times),))
                ds[f][e0:] = values
            e0 += len(times)
        ds["event_time"].parent.attrs["words_discarded"] = state.discarded
        ds["event_time"].parent.attrs["words_pending"] = len(state.carry)
        return (p0 + len(packets), state, e0)

    def _create_events(self, g):
        grp = self._h5[ENTRY][g.name].require_group("events")
        words = event_words.words_per_event(g.sample_bits, g.id_bits)
        describe(grp, "NXcollection", f"the channel's events, rebuilt from its samples (the events' words: "
                 f"{words} of {g.sample_bits} bits an event, the first marked by its top bit; ethdaq.host.events), "
                 f"in the order of the datagrams they end in; words_discarded: words of no whole event (cut by "
                 f"a loss, a run's start or end)", id_bits=g.id_bits, words_per_event=words, words_discarded=0,
                 words_pending=0)
        fields = [("event_time", "<i8", "ns", "each event's time as its front-end sent it: the board's PTP "
                   "time in ns (as the packets' timestamp)"),
                  ("event_id", "<i4", "1", f"each event's id ({g.id_bits} bits), as its front-end sent it"),
                  ("packet", "<u8", "1", "index in ../packets of the datagram the event ends in")]
        if not all(f in grp for f, *_ in fields):
            for f, dtype, units, doc in fields:
                ds = grp.create_dataset(f, shape=(0,), maxshape=(None,), dtype=dtype, chunks=(PACKETS_CHUNK,))
                describe(ds, None, doc, units=units)
        g.events_ds = {f: grp[f] for f, *_ in fields}
        return g.events_ds

    def event_counts(self):
        """{group name: (events in the file, words of no whole event so far, words pending)} of
        the channels of events; what is buffered is not yet counted (flush() first)."""
        return {name: (g.events[2], g.events[1].discarded, len(g.events[1].carry))
                for name, g in self._groups.items() if g.events is not None}

    def close(self, summary=None):
        """Flush, write `summary` (a JSON-able dict) and the `closed` time, close. Safe to call
        again (it then does nothing) and from a `finally` block."""
        if self._h5 is None:
            return
        try:
            text = None if summary is None else _summary_json(summary)
        except (TypeError, ValueError):
            self._close_file(None)  # The data is worth more than the summary: keep it.
            raise
        self._close_file(text)

    def _close_file(self, summary_text):
        try:
            self.flush()
            for g in self._groups.values():     # The run has ended: an unfinished event is no event.
                if g.events_ds is not None:
                    attrs = g.events_ds["event_time"].parent.attrs
                    attrs["words_discarded"] = g.events[1].discarded + len(g.events[1].carry)
                    attrs["words_pending"] = 0
            if summary_text is not None:
                self._h5.attrs["summary"] = summary_text
            self._h5.attrs["closed"] = now_iso()
        finally:
            h5, self._h5 = self._h5, None
            h5.close()


def _write_board(h5, section, values):
    if not (isinstance(section, str) and section.isidentifier()):
        raise ValueError(f"section must be a name like 'identify', not {section!r}")
    if dataclasses.is_dataclass(values):   # protocol.Identity, Config, Status, PtpStatus
        values = dataclasses.asdict(values)
    values = values._asdict() if hasattr(values, "_asdict") else dict(values)
    board = h5[ENTRY][BOARD]
    if section in board:
        del board[section]
    grp = board.create_group(section)
    describe(grp, "NXcollection", f"the board's {section} reply, recorded {now_iso()}")
    set_attrs(grp, values)


def set_board(path, section, values):
    """Writer.set_board on a closed run file: record a board's reply after the run (e.g. by a
    command that asked the board while `ethdaq recv` wrote the file). Raises RunFileError."""
    with open_run(path):  # A run file, readable: the same one-line errors as reading.
        pass
    try:
        with h5py.File(path, "r+") as h5:
            _write_board(h5, section, values)
    except OSError as e:
        raise RunFileError(f"cannot write {path}: {h5_reason(e)}") from None


def _chunk(n, most):
    """Chunk length for a dataset created holding n items: n, within MIN_CHUNK..most (a run that
    ends before its first flush fills its chunks exactly)."""
    return min(most, max(MIN_CHUNK, int(n)))


def _attr_value(value):
    """A value HDF5 stores as an attribute: scalars and strings as they are, bytes as hex, None
    and anything else as JSON text."""
    if isinstance(value, (str, bool, int, float, np.generic)):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    return json.dumps(value, default=_json_default)


def set_attrs(obj, values):
    for k, v in values.items():
        obj.attrs[k] = _attr_value(v)


def describe(obj, nx_class, description, **attrs):
    """NeXus class (None: a dataset), description and further attributes of a group or dataset."""
    if nx_class is not None:
        obj.attrs["NX_class"] = nx_class
    obj.attrs["description"] = description
    set_attrs(obj, attrs)


def _widen(raw, nbytes, dtype):
    """Big-endian samples of 3, 5, 6 or 7 bytes -> native `dtype` (4 or 8 bytes)."""
    width = dtype.itemsize
    wide = np.zeros((raw.size // nbytes, width), dtype=np.uint8)
    wide[:, width - nbytes:] = raw.reshape(-1, nbytes)
    return wide.reshape(-1).view(f">u{width}").astype(dtype)


# Reading ------------------------------------------------------------------------------------------

def h5_reason(e):
    """h5py's OSError text, reduced to its first line."""
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _plain(value):
    """An attribute as a plain Python value (other tools may write bytes or numpy scalars)."""
    if isinstance(value, (bytes, np.bytes_)):
        return value.decode("utf-8", "replace")
    return value.item() if isinstance(value, np.generic) else value


def open_run(path):
    """Open a run file for reading. Raises RunFileError (one-line message) if it cannot be read."""
    return Run(path)


class Run:
    """A run file opened for reading (a context manager; close() when done)."""

    def __init__(self, path):
        self.path = Path(path)
        try:
            with open(self.path, "rb"):  # The OS's reason (no such file, permission, directory).
                pass
        except OSError as e:
            raise RunFileError(f"cannot open {path}: {e.strerror or e}") from None
        if not h5py.is_hdf5(self.path):
            raise RunFileError(f"{path} is not an ethdaq run file (not HDF5)")
        try:
            self._h5 = h5py.File(self.path, "r")
        except OSError as e:
            if "unable to lock file" in str(e):
                raise RunFileError(f"cannot open {path}: another process has it open for writing "
                                   f"(HDF5 file lock); read it once the writer has closed it") from None
            raise RunFileError(f"cannot open {path}: {h5_reason(e)}") from None
        try:
            self._check(path)
            try:
                self.streams = self._read_streams()
            except (KeyError, ValueError) as e:
                raise RunFileError(f"{path} is a damaged ethdaq run file ({e})") from None
        except BaseException:
            self._h5.close()
            raise

    def _check(self, path):
        attrs = self._h5.attrs
        fmt, version = (_plain(attrs.get(k)) for k in ("format", "format_version"))
        if fmt is None:
            raise RunFileError(f"{path} is not an ethdaq run file (no format attribute)")
        if fmt != FORMAT:
            raise RunFileError(f"{path} is not an ethdaq run file (format is {fmt!r}, not {FORMAT!r})")
        if version not in READ_VERSIONS:
            raise RunFileError(f"{path} has format_version {version!r}; this ethdaq reads versions "
                               f"{', '.join(map(str, READ_VERSIONS))}")
        if not isinstance(self._h5.get(ENTRY), h5py.Group):
            raise RunFileError(f"{path} is not an ethdaq run file (no /{ENTRY} group)")

    def _read_streams(self):
        out = {}
        for name, grp in self._h5[ENTRY].items():
            if name == BOARD:
                continue
            a = grp.attrs
            key = (int(ipaddress.IPv4Address(_plain(a["src_ip"]))), int(a["src_port"]), int(a["stream_id"]))
            # The shortest field: a flush killed half-way may have lengthened some fields only.
            log = grp["packets"]
            n_packets = (log.shape[0] if isinstance(log, h5py.Dataset) else
                         min(log[f].shape[0] for f in PACKETS_DTYPE.names))
            out[name] = StreamInfo(name, key, _plain(a["src_ip"]), key[1], key[2], int(a["sample_bits"]),
                                   n_packets, grp["samples"].shape[0])
        return out

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self._h5 is not None:
            self._h5.close()
            self._h5 = None

    @property
    def created(self):
        return _plain(self._h5.attrs["created"])

    @property
    def closed_at(self):
        """When the writer closed the file cleanly, or None (killed, or still being written)."""
        return _plain(self._h5.attrs.get("closed"))

    @property
    def summary(self):
        """The run summary given to Writer.close(), as a dict, or None."""
        text = self._h5.attrs.get("summary")
        return None if text is None else json.loads(text)

    @property
    def meta(self):
        """The writer's meta attributes (non-scalar values as the JSON text they were stored as)."""
        return {k: _plain(v) for k, v in self._h5.attrs.items() if k not in RESERVED_ATTRS}

    @property
    def run_uuid(self):
        """The file's random run id (uuid4 text): unique, unlike the board's run numbers (None in
        a format_version 1 file)."""
        return _plain(self._h5.attrs.get("run_uuid"))

    @property
    def board(self):
        """The board's replies recorded with Writer.set_board: {section: {name: value}}."""
        board = self._h5[ENTRY].get(BOARD)
        if board is None:
            return {}
        return {name: {k: _plain(v) for k, v in grp.attrs.items() if k not in ("NX_class", "description")}
                for name, grp in board.items()}

    def board_runs(self, stream):
        """The board's run numbers seen in a stream (group name or key), ascending."""
        runs = self._h5[ENTRY][self._name(stream)].attrs.get("board_runs")
        return [] if runs is None else [int(r) for r in runs]

    def _name(self, stream):
        """A group name or a stream key tuple -> group name (a key names its first-width group)."""
        name = stream if isinstance(stream, str) else stream_name(stream)
        if name not in self.streams:
            raise KeyError(f"stream must be one of {', '.join(self.streams) or '(none)'}, not {stream!r}")
        return name

    def packets(self, stream, start=None, stop=None):
        """Packet records (PACKETS_DTYPE) of a stream (group name or key), optionally a slice."""
        name = self._name(stream)
        return _read_packets(self._h5[ENTRY][name]["packets"], self.streams[name].n_packets, start, stop)

    def samples(self, stream, start=None, stop=None):
        """Samples of a stream (group name or key) as native unsigned ints, optionally a slice."""
        return self._h5[ENTRY][self._name(stream)]["samples"][start:stop]

    def events(self, stream):
        """A channel of events' events: {"event_time", "event_id", "packet": arrays, plus the
        group's attributes id_bits, words_per_event, words_discarded, words_pending}; None for a
        stream of samples (or one the writer was not told carries events)."""
        grp = self._h5[ENTRY][self._name(stream)].get("events")
        if grp is None:
            return None
        n = min(grp[f].shape[0] for f in ("event_time", "event_id", "packet"))   # A killed flush: the shortest.
        out = {f: grp[f][:n] for f in ("event_time", "event_id", "packet")}
        out.update({k: int(grp.attrs[k]) for k in ("id_bits", "words_per_event", "words_discarded", "words_pending")})
        return out

    def iter_batches(self, packets_per_batch=4096):
        """Yield the file's datagrams as `Batch`es of up to packets_per_batch datagrams, rebuilt
        like the live receiver's (PACKET_DTYPE records, big-endian payload back to back).

        Streams are merged by arrival time (rx_time_ns); each stream keeps its file order (its
        arrival order) even if its clock stepped back, and equal times keep the groups' order."""
        if not (isinstance(packets_per_batch, int) and packets_per_batch > 0):
            raise ValueError(f"packets_per_batch must be a positive integer, not {packets_per_batch!r}")
        cursors = [_Cursor(self._h5[ENTRY][name], info) for name, info in self.streams.items()]
        queue = _Queue()
        while True:
            for c in cursors:
                c.refill(packets_per_batch)
            active = [c for c in cursors if c.buffered]
            if not active:
                break
            # Everything up to the smallest "last buffered time" can be ordered now: later
            # refills only bring times at or above it. One cursor is always drained entirely.
            cutoff = min(c.key[-1] for c in active)
            parts = [c.take(cutoff) for c in active]
            assert sum(len(p) for _, p, _ in parts), "merge made no progress"  # Never loop forever.
            keys = np.concatenate([k for k, _, _ in parts])
            order = np.argsort(keys, kind="stable")
            packets, src = _concat_parts([(p, raw) for _, p, raw in parts])
            queue.put(packets[order], src)
            while queue.size >= packets_per_batch:
                yield queue.take(packets_per_batch)
        while queue.size:
            yield queue.take(packets_per_batch)


def _read_packets(log, n_packets, start=None, stop=None):
    """Records start:stop (PACKETS_DTYPE) of a packets group's first n_packets, one field at a time."""
    start, stop, _ = slice(start, stop).indices(n_packets)
    if isinstance(log, h5py.Dataset):  # format_version 1: one record dataset.
        return log[start:stop]
    out = np.empty(max(0, stop - start), dtype=PACKETS_DTYPE)
    for f in PACKETS_DTYPE.names:
        out[f] = log[f][start:stop]
    return out


class _Cursor:
    """Reads one group's packets and samples in order, a block at a time."""
    def __init__(self, grp, info):
        self.packets_log = grp["packets"]
        self.samples_ds = grp["samples"]
        self.info = info
        self.pos = 0
        self.recs = np.zeros(0, PACKETS_DTYPE)
        self.key = np.zeros(0, np.uint64)
        self.carry = np.uint64(0)

    @property
    def buffered(self):
        return len(self.recs) > 0

    def refill(self, n):
        if self.buffered or self.pos >= self.info.n_packets:
            return
        self.recs = _read_packets(self.packets_log, self.info.n_packets, self.pos, self.pos + n)
        self.pos += len(self.recs)
        # Running maximum: non-decreasing, so sorting by it never reorders this stream.
        self.key = np.maximum.accumulate(np.maximum(self.recs["rx_time_ns"], self.carry))
        self.carry = self.key[-1]

    def take(self, cutoff):
        k = int(np.searchsorted(self.key, cutoff, side="right"))
        if k == 0:
            return self.key[:0], np.zeros(0, PACKET_DTYPE), np.zeros(0, np.uint8)
        recs, keys = self.recs[:k], self.key[:k]
        self.recs, self.key = self.recs[k:], self.key[k:]
        bits = self.info.sample_bits
        nbytes = bits // 8
        first = int(recs["first_sample"][0])
        last = int(recs["first_sample"][-1]) + int(recs["sample_count"][-1])
        raw = _to_wire(self.samples_ds[first:last], nbytes)
        p = np.zeros(len(recs), dtype=PACKET_DTYPE)
        for f in _COPIED_FIELDS:
            p[f] = recs[f]
        p["src_ip"], p["src_port"], p["stream_id"] = self.info.key
        p["sample_bits"] = bits
        p["offset"] = (recs["first_sample"] - np.uint64(first)) * np.uint64(nbytes)
        return keys, p, raw


def _to_wire(samples, nbytes):
    """Native samples -> big-endian bytes of nbytes each, as on the wire."""
    if nbytes in (1, 2, 4, 8):
        return samples.astype(f">u{nbytes}").view(np.uint8)
    width = samples.dtype.itemsize
    wide = samples.astype(f">u{width}").view(np.uint8).reshape(-1, width)
    return np.ascontiguousarray(wide[:, width - nbytes:]).reshape(-1)


def _concat_parts(parts):
    """[(packets, raw)] -> one packets array with offsets into one raw array."""
    base, raws, packets = 0, [], []
    for p, raw in parts:
        p = p.copy()
        p["offset"] += np.uint64(base)
        base += raw.size
        packets.append(p)
        raws.append(raw)
    return np.concatenate(packets), np.concatenate(raws)


class _Queue:
    """Ordered datagrams waiting to be cut into Batches; payloads rebuilt back to back."""
    def __init__(self):
        self.items = []  # [(packets, src)]
        self.size = 0

    def put(self, packets, src):
        self.items.append((packets, src))
        self.size += len(packets)

    def take(self, n):
        parts = []
        while n and self.items:
            packets, src = self.items[0]
            head, rest = packets[:n], packets[n:]
            if len(rest):
                self.items[0] = (rest, src)
            else:
                self.items.pop(0)
            lengths = head["sample_count"].astype(np.int64) * (head["sample_bits"].astype(np.int64) // 8)
            raw = _gather(src, head["offset"], lengths)
            head = head.copy()
            head["offset"] = 0
            if len(head) > 1:
                head["offset"][1:] = np.cumsum(lengths[:-1])
            parts.append((head, raw))
            n -= len(head)
            self.size -= len(head)
        packets, payload = _concat_parts(parts)
        return Batch(packets, payload)
