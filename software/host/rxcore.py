#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""The host receiver's fast path: a C core (rxcore/rxcore.c, built by `pip install -e .` into
_rxcore*.so and loaded with ctypes) that reads DAQ datagrams with recvmmsg, accounts for every
loss like ethdaq.host.receiver (its pure-Python reference model), and hands out the datagrams
that bring new data as numpy arrays (ethdaq.host.batch.Batch).

    with RxCore(port=5000) as rx:
        while running:
            batch = rx.recv(timeout=0.1)     # Batch(packets, payload); empty on timeout
            ...
        stats = rx.stats()                   # RxStats: totals, per-stream counters, drops

Streams are keyed by (source IPv4 as int, source UDP port, stream_id), so one receiver takes
several boards at once. Several processes can share a port with reuseport=True (the kernel
spreads sources over them by hashing the source address and port). docs/receiver.md has more.
"""

import ctypes
import errno
import importlib.machinery
import ipaddress
import math
import os
import warnings
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Dict, Optional

import numpy as np

from ethdaq.host.batch import PACKET_DTYPE, Batch
from ethdaq.host.receiver import MIB, PortInUse, ReceiverError, StreamStats

DEFAULT_PORT              = 5000
DEFAULT_RCVBUF            = 64 * MIB   # ~0.5 s of a saturated 1 Gb/s link.
DEFAULT_MAX_PACKETS       = 4096       # Packet records per Batch at most.
DEFAULT_MAX_PAYLOAD_BYTES = 4 * MIB    # Sample bytes per Batch at most (larger: longer stalls per call).
DEFAULT_MAX_DATAGRAM      = 9000       # Longer datagrams count as truncated (the board sends <= 8972).
DEFAULT_BATCH             = 256        # Datagrams per recvmmsg call.
DEFAULT_GRO_BATCH         = 64         # Buffers per recvmmsg call with GRO: 64 KiB each.
DEFAULT_MAX_STREAMS       = 4096

ABI_VERSION = 3  # rxcore.h RX_ABI_VERSION
LIBRARY_NAME = "_rxcore"
SOURCE_DIR = Path(__file__).resolve().parent / "rxcore"

# rx_malformed order in rxcore.h; names as receiver._malformed_reason gives them.
MALFORMED_REASONS = ["truncated", "short", "bad magic", "bad version", "bad header_len",
                     "bad sample_bits", "wrong length"]
# rx_packet fields in declaration order, which is PACKET_DTYPE's.
PACKET_FIELDS = ["src_ip", "src_port", "stream_id", "flags", "sample_bits", "late", "run",
                 "sample_count", "seq", "timestamp", "dropped", "rx_time_ns", "offset"]

INT_MAX = 2**31 - 1


class RxCoreMissing(ReceiverError):
    """The C core is not built (or is out of date)."""


class RcvbufWarning(UserWarning):
    """The kernel granted a smaller receive buffer than asked."""


class BusyPollWarning(UserWarning):
    """The kernel refused SO_BUSY_POLL."""


class _Config(ctypes.Structure):
    _fields_ = [("bind_ip", ctypes.c_uint32), ("port", ctypes.c_uint32), ("rcvbuf", ctypes.c_int32),
                ("rcvbuf_force", ctypes.c_int32), ("busy_poll_us", ctypes.c_int32),
                ("reuseport", ctypes.c_int32), ("max_streams", ctypes.c_uint32),
                ("batch", ctypes.c_uint32), ("max_datagram", ctypes.c_uint32),
                ("kernel_timestamps", ctypes.c_int32), ("gro", ctypes.c_int32)]


class _Info(ctypes.Structure):
    _fields_ = [("port", ctypes.c_uint32), ("rcvbuf_kernel", ctypes.c_int32),
                ("rcvbuf_forced", ctypes.c_int32), ("busy_poll_us", ctypes.c_int32),
                ("busy_poll_errno", ctypes.c_int32), ("rxq_ovfl", ctypes.c_int32),
                ("timestamps", ctypes.c_int32), ("gro", ctypes.c_int32), ("gro_errno", ctypes.c_int32),
                ("err", ctypes.c_int32), ("where", ctypes.c_char * 64)]


class _Totals(ctypes.Structure):
    _fields_ = [("datagrams", ctypes.c_uint64), ("bytes", ctypes.c_uint64),
                ("delivered", ctypes.c_uint64), ("delivered_bytes", ctypes.c_uint64),
                ("malformed", ctypes.c_uint64 * len(MALFORMED_REASONS)),
                ("table_full", ctypes.c_uint64), ("gaps_unrecorded", ctypes.c_uint64),
                ("kernel_dropped", ctypes.c_uint64), ("recv_calls", ctypes.c_uint64),
                ("buffers", ctypes.c_uint64),
                ("kernel_drops_known", ctypes.c_uint32), ("streams", ctypes.c_uint32)]


_HAVE_FIRST_SEQ, _HAVE_LAST_SEQ, _HAVE_RUN, _HAVE_SAMPLE_BITS = 1, 2, 4, 8
_COUNTERS = ["datagrams", "samples", "payload_bytes", "first_seq", "last_seq", "missing",
             "out_of_order", "duplicates", "board_dropped", "overflow_flags", "runs", "last_flags"]


class _StreamStats(ctypes.Structure):
    _fields_ = [("src_ip", ctypes.c_uint32), ("src_port", ctypes.c_uint16), ("stream_id", ctypes.c_uint16),
                ("run", ctypes.c_uint32), ("sample_bits", ctypes.c_uint32), ("have", ctypes.c_uint32),
                ("reserved", ctypes.c_uint32)] + [(name, ctypes.c_uint64) for name in _COUNTERS]


_lib = None
_EMPTY = Batch.empty()  # Shared: zero-length arrays hold nothing to change.


def library_path():
    """Where the built core is, or None."""
    here = Path(__file__).resolve().parent
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = here / f"{LIBRARY_NAME}{suffix}"
        if path.exists():
            return path
    return None


def load():
    """The C core as a ctypes library (loaded once); RxCoreMissing if not built or out of date."""
    global _lib
    if _lib is not None:
        return _lib
    path = library_path()
    rebuild = "run `.venv/bin/python -m pip install -e .` in the repository"
    if path is None:
        raise RxCoreMissing(f"the receive core is not built (no {LIBRARY_NAME}*.so in "
                            f"{Path(__file__).resolve().parent}): run `make`, or {rebuild[4:]}")
    # A .so older than its sources would run old code with the new Python side.
    for src in sorted(SOURCE_DIR.glob("*.[ch]")):
        if src.stat().st_mtime > path.stat().st_mtime:
            raise RxCoreMissing(f"the receive core {path.name} is older than {src.name}: {rebuild}")
    lib = ctypes.CDLL(str(path))  # CDLL releases the GIL during calls.
    lib.rx_abi_version.restype = ctypes.c_uint32
    if lib.rx_abi_version() != ABI_VERSION:
        raise RxCoreMissing(f"the receive core {path.name} has interface version {lib.rx_abi_version()}, "
                            f"not {ABI_VERSION}: {rebuild}")
    lib.rx_sizeof.restype = ctypes.c_size_t
    lib.rx_sizeof.argtypes = [ctypes.c_int]
    for which, what in enumerate([PACKET_DTYPE, _Config, _Info, _Totals, _StreamStats]):
        size = what.itemsize if isinstance(what, np.dtype) else ctypes.sizeof(what)
        if lib.rx_sizeof(which) != size:
            raise RxCoreMissing(f"the receive core {path.name} does not match rxcore.py "
                                f"(struct {which}: {lib.rx_sizeof(which)} != {size} bytes): {rebuild}")
    lib.rx_packet_layout.restype = ctypes.c_size_t
    lib.rx_packet_layout.argtypes = [ctypes.POINTER(ctypes.c_uint32), ctypes.c_size_t]
    lib.rx_open.restype = ctypes.c_void_p
    lib.rx_open.argtypes = [ctypes.POINTER(_Config), ctypes.POINTER(_Info)]
    lib.rx_recv.restype = ctypes.c_int
    lib.rx_recv.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p,
                            ctypes.c_uint64, ctypes.POINTER(ctypes.c_uint64), ctypes.c_int]
    lib.rx_totals.restype = None
    lib.rx_totals.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Totals), ctypes.c_int]
    lib.rx_streams.restype = ctypes.c_uint32
    lib.rx_streams.argtypes = [ctypes.c_void_p, ctypes.POINTER(_StreamStats), ctypes.c_uint32]
    lib.rx_pending.restype = ctypes.c_uint32
    lib.rx_pending.argtypes = [ctypes.c_void_p]
    lib.rx_close.restype = None
    lib.rx_close.argtypes = [ctypes.c_void_p]
    _lib = lib
    return lib


def packet_layout():
    """{field: byte offset} of the C struct rx_packet, and its size."""
    lib = load()
    offsets = (ctypes.c_uint32 * len(PACKET_FIELDS))()
    size = lib.rx_packet_layout(offsets, len(PACKET_FIELDS))
    return dict(zip(PACKET_FIELDS, offsets)), size


@dataclass
class RxStats:
    """Everything one RxCore saw since it opened. Stream dicts have receiver.StreamStats' fields."""
    streams: Dict[tuple, dict] = field(default_factory=dict)  # (src_ip, src_port, stream_id) -> counters
    datagrams: int = 0          # Every datagram read: malformed, refused and duplicates too.
    bytes: int = 0              # Their UDP payload bytes.
    delivered: int = 0          # Packet records handed out in Batches (new data).
    delivered_bytes: int = 0    # Sample bytes handed out.
    malformed: Dict[str, int] = field(default_factory=dict)  # reason -> count (only reasons seen)
    kernel_dropped: Optional[int] = 0   # Datagrams the kernel dropped (buffer full); None: unknown.
    # With GRO the kernel counts dropped buffers, each a datagram or a merged run of up to 64:
    # this is its count, and kernel_dropped is then exact only while it is 0 (else None; the
    # streams' `missing` still counts every datagram lost before a later one arrived).
    kernel_dropped_buffers: Optional[int] = None
    table_full: int = 0         # Datagrams of new streams refused: max_streams reached.
    gaps_unrecorded: int = 0    # Gaps forgotten early for lack of memory (normally 0).
    recv_calls: int = 0         # recvmmsg calls that returned datagrams.
    buffers: int = 0            # Buffers they returned: datagrams, or with GRO runs of them.

    @property
    def payload_bytes(self):
        return sum(s["payload_bytes"] for s in self.streams.values())

    @property
    def missing(self):
        return sum(s["missing"] for s in self.streams.values())

    @property
    def duplicates(self):
        return sum(s["duplicates"] for s in self.streams.values())

    @property
    def malformed_total(self):
        return sum(self.malformed.values())


_STREAM_FIELDS = [f.name for f in fields(StreamStats)]


def _stream_dict(s):
    d = {name: getattr(s, name) for name in _COUNTERS}
    d["stream_id"] = s.stream_id
    d["first_seq"] = s.first_seq if s.have & _HAVE_FIRST_SEQ else None
    d["last_seq"] = s.last_seq if s.have & _HAVE_LAST_SEQ else None
    d["run"] = s.run if s.have & _HAVE_RUN else None
    d["sample_bits"] = s.sample_bits if s.have & _HAVE_SAMPLE_BITS else None
    return {name: d[name] for name in _STREAM_FIELDS}


def _int_in(name, value, lo, hi, what=None):
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ValueError(f"{name} must be {what or f'an integer in {lo}..{hi}'}, not {value!r}")
    return value


class RxCore:
    """A UDP socket read by the C core. Not thread-safe: one thread calls recv().

    rcvbuf: receive buffer to ask for, bytes; the kernel caps it at net.core.rmem_max unless
    rcvbuf_force and CAP_NET_ADMIN (SO_RCVBUFFORCE). rcvbuf_granted is what it granted, in the same
    unit (the kernel charges twice that for bookkeeping); rcvbuf_capped if less than asked.
    busy_poll_us: SO_BUSY_POLL (only NIC drivers with NAPI busy polling gain from it; loopback has
    none). reuseport: SO_REUSEPORT, so several processes can share the port. max_packets and
    max_payload_bytes bound one Batch; max_datagram bounds one datagram (longer: "truncated");
    batch is the number of datagrams per recvmmsg call; max_streams bounds the stream table
    (datagrams of streams past it are counted as table_full).
    kernel_timestamps: rx_time_ns is the kernel's arrival time of each datagram (SO_TIMESTAMPNS),
    not the time the read that took it returned (one clock reading per recvmmsg call, shared by up
    to `batch` datagrams); it costs the kernel about 15 % more time per datagram (with GRO the
    datagrams of one merged buffer share its first one's time).
    gro: UDP_GRO (default on): where the kernel merges a run of same-sized datagrams from one
    source (NIC drivers with GRO, under load; a sender's UDP GSO buffers on loopback), the core
    reads the run as one buffer and splits it, which costs far less per datagram than reading
    each. Counting is the same. `gro_active` says whether the kernel accepted it (Linux >= 5.0).
    batch: buffers per recvmmsg call (default 256, or 64 with GRO since each buffer is then 64 KiB).
    """

    def __init__(self, bind="0.0.0.0", port=DEFAULT_PORT, rcvbuf=DEFAULT_RCVBUF, busy_poll_us=0,
                 reuseport=False, max_packets=DEFAULT_MAX_PACKETS,
                 max_payload_bytes=DEFAULT_MAX_PAYLOAD_BYTES, max_datagram=DEFAULT_MAX_DATAGRAM,
                 batch=None, max_streams=DEFAULT_MAX_STREAMS, rcvbuf_force=True,
                 kernel_timestamps=False, gro=True):
        try:
            bind = str(ipaddress.IPv4Address(bind))
        except ValueError:
            raise ValueError(f"bind must be dotted IPv4 like 0.0.0.0, not {bind!r}") from None
        _int_in("port", port, 0, 65535)
        _int_in("rcvbuf", rcvbuf, 1, INT_MAX, f"a positive number of bytes up to {INT_MAX}")
        _int_in("busy_poll_us", busy_poll_us, 0, INT_MAX, "a non-negative number of microseconds")
        if not isinstance(reuseport, bool):
            raise ValueError(f"reuseport must be True or False, not {reuseport!r}")
        if not isinstance(rcvbuf_force, bool):
            raise ValueError(f"rcvbuf_force must be True or False, not {rcvbuf_force!r}")
        if not isinstance(kernel_timestamps, bool):
            raise ValueError(f"kernel_timestamps must be True or False, not {kernel_timestamps!r}")
        if not isinstance(gro, bool):
            raise ValueError(f"gro must be True or False, not {gro!r}")
        if batch is None:
            batch = DEFAULT_GRO_BATCH if gro else DEFAULT_BATCH
        _int_in("max_packets", max_packets, 1, 2**24)
        _int_in("max_datagram", max_datagram, 41, 65536)
        _int_in("max_payload_bytes", max_payload_bytes, max_datagram - 40, 2**40,
                f"at least max_datagram - 40 = {max_datagram - 40} bytes")
        _int_in("batch", batch, 1, 1024)
        _int_in("max_streams", max_streams, 1, 65536)
        self._c = None
        self._lib = load()
        self.bind = bind
        self.rcvbuf_requested = rcvbuf
        self.reuseport = reuseport
        self.max_packets = max_packets
        self.max_payload_bytes = max_payload_bytes
        self._final = None
        cfg = _Config(int(ipaddress.IPv4Address(bind)), port, rcvbuf, int(rcvbuf_force), busy_poll_us,
                      int(reuseport), max_streams, batch, max_datagram, int(kernel_timestamps), int(gro))
        info = _Info()
        c = self._lib.rx_open(ctypes.byref(cfg), ctypes.byref(info))
        if not c:
            where = info.where.decode(errors="replace")
            if where == "bind" and info.err == errno.EADDRINUSE:
                hint = "" if reuseport else " (another receiver running? use --reuseport to share it)"
                raise PortInUse(f"UDP port {port} is already in use on {bind}{hint}")
            if where == "bind":
                raise ReceiverError(f"cannot bind UDP {bind}:{port}: {os.strerror(info.err)}")
            raise ReceiverError(f"cannot open the receive socket: {where}: {os.strerror(info.err)}")
        self._c = c
        self.port = info.port
        self.rcvbuf_granted = info.rcvbuf_kernel // 2
        self.rcvbuf_forced = bool(info.rcvbuf_forced)
        self.rcvbuf_capped = self.rcvbuf_granted < rcvbuf
        self.busy_poll_us = info.busy_poll_us
        self.busy_poll_error = os.strerror(info.busy_poll_errno) if info.busy_poll_errno else None
        self.kernel_timestamps = bool(info.timestamps)
        self.gro_active = bool(info.gro)
        self.gro_error = os.strerror(info.gro_errno) if info.gro_errno else None
        # Written to now (np.zeros maps pages lazily) so the first busy recv() does not fault.
        self._packets = np.ones(max_packets, dtype=PACKET_DTYPE)
        self._payload = np.ones(max_payload_bytes, dtype=np.uint8)
        # Per call, only what changes is computed: .ctypes.data costs microseconds, and numpy
        # copies a packed record array field by field (~100 ns a record) but bytes at memcpy speed.
        self._packets_ptr = self._packets.ctypes.data
        self._payload_ptr = self._payload.ctypes.data
        self._packet_bytes = self._packets.view(np.uint8)
        self._used = ctypes.c_uint64()
        self._used_ref = ctypes.byref(self._used)
        self._rx_recv = self._lib.rx_recv
        if self.rcvbuf_capped:
            warnings.warn(self.rcvbuf_warning(), RcvbufWarning, stacklevel=2)
        if busy_poll_us and self.busy_poll_error:
            warnings.warn(f"SO_BUSY_POLL of {busy_poll_us} us refused by the kernel "
                          f"({self.busy_poll_error}): receiving without busy polling",
                          BusyPollWarning, stacklevel=2)

    def rcvbuf_warning(self):
        """What to tell the user when the buffer was capped, else None."""
        if not self.rcvbuf_capped:
            return None
        return (f"receive buffer capped at {self.rcvbuf_granted / MIB:.1f} MiB of "
                f"{self.rcvbuf_requested / MIB:.1f} MiB asked: bursts may be dropped by the kernel; "
                f"raise net.core.rmem_max (sysctl -w net.core.rmem_max={self.rcvbuf_requested}) "
                f"or run with CAP_NET_ADMIN")

    def recv(self, timeout=0.1, max_packets=None):
        """Wait up to `timeout` seconds (None: without limit, 0: not at all) for a datagram, then
        take what is ready, up to max_packets datagrams with new data (default and at most the
        core's max_packets; a smaller value makes a count exact: nothing past it is handed out,
        and without GRO nothing past it is read from the socket; with GRO the rest of a merged
        buffer waits in the core for the next call, see `pending`) and max_payload_bytes of
        samples. Returns
        a Batch of the datagrams that brought new data (its arrays are its own); empty on timeout,
        or when only duplicates or malformed datagrams came."""
        if timeout is None:
            ms = -1
        elif isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout >= 0:
            raise ValueError(f"timeout must be a non-negative number of seconds or None, not {timeout!r}")
        else:
            ms = min(INT_MAX, math.ceil(timeout * 1000))
        if max_packets is None:
            limit = self.max_packets
        else:
            limit = _int_in("max_packets", max_packets, 1, self.max_packets)
        if self._c is None:
            raise ReceiverError("recv() on a closed RxCore")
        n = self._rx_recv(self._c, self._packets_ptr, limit, self._payload_ptr, self.max_payload_bytes,
                          self._used_ref, ms)
        if n < 0:
            raise OSError(-n, f"receiving: {os.strerror(-n)}")
        if n == 0:
            return _EMPTY
        return Batch(self._packet_bytes[:n * PACKET_DTYPE.itemsize].copy().view(PACKET_DTYPE),
                     self._payload[:self._used.value].copy())

    @property
    def pending(self):
        """Merged (GRO) buffers read from the socket whose datagrams are not all handed out
        yet: the next recv() returns them first, without waiting."""
        return self._lib.rx_pending(self._c) if self._c is not None else 0

    def stats(self):
        """Counters so far (after close(): the final ones). Reads the kernel's drop counter now
        (SO_MEMINFO), so drops at the end of a burst are counted."""
        if self._c is None:
            return self._final if self._final is not None else RxStats()
        return self._stats(meminfo=True)

    def _stats(self, meminfo):
        t = _Totals()
        self._lib.rx_totals(self._c, ctypes.byref(t), int(meminfo))
        arr = (_StreamStats * max(1, t.streams))()
        count = self._lib.rx_streams(self._c, arr, t.streams)
        streams = {}
        for s in arr[:min(count, t.streams)]:
            streams[(s.src_ip, s.src_port, s.stream_id)] = _stream_dict(s)
        kernel = t.kernel_dropped if t.kernel_drops_known else None
        buffers = None
        if kernel is not None and self.gro_active:
            kernel, buffers = (0 if kernel == 0 else None), kernel
        return RxStats(
            streams=streams, datagrams=t.datagrams, bytes=t.bytes, delivered=t.delivered,
            delivered_bytes=t.delivered_bytes,
            malformed={r: t.malformed[i] for i, r in enumerate(MALFORMED_REASONS) if t.malformed[i]},
            kernel_dropped=kernel, kernel_dropped_buffers=buffers,
            table_full=t.table_full, gaps_unrecorded=t.gaps_unrecorded, recv_calls=t.recv_calls,
            buffers=t.buffers)

    def close(self):
        if self._c is not None:
            self._final = self._stats(meminfo=True)
            self._lib.rx_close(self._c)
            self._c = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_c", None) is not None:
            self.close()
