#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""DAQ receiver: takes the streamer's UDP datagrams (ethdaq.wire.daqformat) and accounts for every
loss, wherever it happened:

- on the board: the `dropped` header field (cumulative samples dropped per stream and run) and
  FLAG_OVERFLOW;
- on the network: gaps in the per-stream `seq` (missing datagrams), plus late and duplicate ones;
- in this host's kernel: datagrams dropped because the socket's receive buffer was full, which
  Linux reports through SO_RXQ_OVFL (and SO_MEMINFO);
- in the datagrams themselves: malformed ones are counted by reason and never stop the receiver.

    with Receiver(port=5000) as rx:
        stats = rx.run(duration=10)
    print(format_stats(stats))

or `python -m ethdaq.host.receiver --port 5000 --duration 10`.
"""

import argparse
import bisect
import errno
import ipaddress
import select
import socket
import struct
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Dict, Optional

from ethdaq.host import argtypes
from ethdaq.wire import daqformat

DEFAULT_PORT   = 5000
DEFAULT_RCVBUF = 32 * 2**20  # Bytes; ~0.25 s of a saturated 1 Gb/s link.
MIB            = 2**20

# Linux socket options, not all exported by the socket module.
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)  # SO_RCVBUF past net.core.rmem_max (CAP_NET_ADMIN).
SO_RXQ_OVFL    = getattr(socket, "SO_RXQ_OVFL", 40)     # Drop count in each datagram's ancillary data.
SO_MEMINFO     = getattr(socket, "SO_MEMINFO", 55)      # u32 array; index 8 is the same drop count.
SK_MEMINFO_DROPS = 8

MAX_DATAGRAM  = 65536  # Larger than any UDP/IPv4 payload, so MSG_TRUNC means something is wrong.
ANC_BUFSIZE   = socket.CMSG_SPACE(4) * 2
RUNS_TRACKED  = 4      # Runs per stream whose gaps late datagrams may still fill.
GAPS_TRACKED  = 4096   # Gap ranges per run; older ones stay missing for good.

_HEADER = struct.Struct(">HBBHHQQQHBBI")  # Same layout as daqformat; only used to name errors.


class ReceiverError(RuntimeError):
    pass


class PortInUse(ReceiverError):
    pass


@dataclass
class StreamStats:
    """What arrived for one stream_id. Data counters (datagrams, samples, payload_bytes) include
    late datagrams that filled a gap but never duplicates, so they are what a consumer got."""
    stream_id: int
    datagrams: int = 0
    samples: int = 0
    payload_bytes: int = 0       # Sample bytes, headers excluded.
    first_seq: Optional[int] = None
    last_seq: Optional[int] = None   # Highest seq of the current run.
    missing: int = 0             # Skipped by seq and not (yet) arrived late.
    out_of_order: int = 0        # Arrived after a higher seq and filled its gap: late, not lost.
    duplicates: int = 0          # seq already received (or its gap forgotten): not counted as data.
    board_dropped: int = 0       # Samples the board says it dropped: newest `dropped` per run, summed.
    overflow_flags: int = 0      # Datagrams with FLAG_OVERFLOW.
    runs: int = 0                # Different `run` values seen.
    run: Optional[int] = None    # Run of the newest run seen.
    last_flags: int = 0          # Datagrams with FLAG_LAST (runs seen to end).
    sample_bits: Optional[int] = None


@dataclass
class Stats:
    """Everything one Receiver saw, cumulative over its run() calls."""
    streams: Dict[int, StreamStats] = field(default_factory=dict)  # By stream_id (by_source: by key).
    datagrams: int = 0           # Every datagram read from the socket, malformed and duplicates too.
    bytes: int = 0               # Their UDP payload bytes.
    malformed: Dict[str, int] = field(default_factory=dict)        # reason -> count
    malformed_last: Dict[str, str] = field(default_factory=dict)   # reason -> last error message
    kernel_dropped: Optional[int] = 0   # Datagrams the kernel dropped (buffer full); None: unknown.
    elapsed: float = 0.0         # Seconds spent in run().

    @property
    def payload_bytes(self):
        return sum(s.payload_bytes for s in self.streams.values())

    @property
    def malformed_total(self):
        return sum(self.malformed.values())

    @property
    def missing(self):
        return sum(s.missing for s in self.streams.values())

    @property
    def datagrams_per_s(self):
        return self.datagrams / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def mib_per_s(self):
        """Sample payload rate in MiB/s (2**20 bytes)."""
        return self.payload_bytes / MIB / self.elapsed if self.elapsed > 0 else 0.0


class _Run:
    """Sequence tracking of one (stream, run): highest seq, plus the still-open gaps below it as
    sorted [start, end) ranges so that a late datagram can be told from a duplicate."""
    __slots__ = ("highest", "starts", "ends", "dropped")

    def __init__(self, seq):
        self.highest = seq
        self.starts  = []
        self.ends    = []
        self.dropped = 0

    def add_gap(self, start, end):
        self.starts.append(start)
        self.ends.append(end)
        if len(self.starts) > GAPS_TRACKED:
            del self.starts[0], self.ends[0]

    def fill(self, seq):
        """Take seq out of a gap; False if it was in none (a duplicate)."""
        i = bisect.bisect_right(self.starts, seq) - 1
        if i < 0 or seq >= self.ends[i]:
            return False
        start, end = self.starts[i], self.ends[i]
        if start == seq and end == seq + 1:
            del self.starts[i], self.ends[i]
        elif start == seq:
            self.starts[i] = seq + 1
        elif end == seq + 1:
            self.ends[i] = seq
        else:
            self.ends[i] = seq
            self.starts.insert(i + 1, seq + 1)
            self.ends.insert(i + 1, end)
            if len(self.starts) > GAPS_TRACKED:  # Bounded here too, like add_gap.
                del self.starts[0], self.ends[0]
        return True


def _malformed_reason(data):
    """Short name of what unpack_header rejected, checked in the same order it checks."""
    if len(data) < daqformat.HEADER_LEN:
        return "short"
    magic, version, header_len, *_, sample_count, sample_bits, _, _ = _HEADER.unpack_from(data)
    if magic != daqformat.MAGIC:
        return "bad magic"
    if version != daqformat.VERSION:
        return "bad version"
    if header_len != daqformat.HEADER_LEN:
        return "bad header_len"
    if sample_bits == 0 or sample_bits % 8:
        return "bad sample_bits"
    return "wrong length"


def _positive(name, value, kind=float):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0 or \
            (kind is int and not isinstance(value, int)):
        what = "integer" if kind is int else "number of seconds"
        raise ValueError(f"{name} must be a positive {what} or None, not {value!r}")
    return value


class Receiver:
    """A UDP socket for DAQ datagrams plus their accounting (self.stats, cumulative).

    rcvbuf is the receive buffer to ask for; the kernel caps it at net.core.rmem_max unless we
    have CAP_NET_ADMIN (SO_RCVBUFFORCE), and reports back twice what it grants (bookkeeping
    overhead): see rcvbuf_granted. Port 0 binds any free port (see self.port).

    Streams are keyed by stream_id, or with by_source by (source IPv4 as int, source UDP port,
    stream_id) like ethdaq.host.rxcore, whose reference model this is.
    """

    def __init__(self, bind_ip="0.0.0.0", port=DEFAULT_PORT, rcvbuf=DEFAULT_RCVBUF, by_source=False):
        try:
            bind_ip = str(ipaddress.IPv4Address(bind_ip))
        except ValueError:
            raise ValueError(f"bind_ip must be dotted IPv4 like 0.0.0.0, not {bind_ip!r}") from None
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"port must be an integer in 0..65535, not {port!r}")
        if isinstance(rcvbuf, bool) or not isinstance(rcvbuf, int) or rcvbuf <= 0:
            raise ValueError(f"rcvbuf must be a positive number of bytes, not {rcvbuf!r}")
        self.bind_ip          = bind_ip
        self.by_source        = bool(by_source)
        self.rcvbuf_requested = rcvbuf
        self.stats            = Stats()
        self._streams         = {}    # stream key -> OrderedDict(run -> _Run)
        self._drops_raw       = 0     # Last kernel drop counter seen (u32, cumulative for the socket).
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self._setup(bind_ip, port, rcvbuf)
        except BaseException:
            self.sock.close()
            raise
        self.port = self.sock.getsockname()[1]
        self._poll = select.poll()
        self._poll.register(self.sock, select.POLLIN)

    def _setup(self, bind_ip, port, rcvbuf):
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, rcvbuf)
        except OSError:  # Not privileged: the kernel silently caps at net.core.rmem_max.
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.rcvbuf_granted = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, SO_RXQ_OVFL, 1)
            self.rxq_ovfl = True
        except OSError:  # Not Linux: kernel drops are unknown rather than zero.
            self.rxq_ovfl = False
            self.stats.kernel_dropped = None
        # Deliberately no SO_REUSEADDR/SO_REUSEPORT: two receivers on one port would each get
        # part of the stream and both report losses that did not happen.
        try:
            self.sock.bind((bind_ip, port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise PortInUse(f"UDP port {port} is already in use on {bind_ip} "
                                f"(another receiver running?)") from None
            raise ReceiverError(f"cannot bind UDP {bind_ip}:{port}: {e.strerror or e}") from None
        self.sock.setblocking(False)

    @property
    def rcvbuf_capped(self):
        """True when the kernel granted less than asked (Linux reports twice the grant)."""
        return self.rcvbuf_granted < 2 * self.rcvbuf_requested

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def run(self, duration=None, max_datagrams=None, idle_timeout=None, on_datagram=None):
        """Receive until `duration` seconds have passed, `max_datagrams` datagrams (valid or not)
        were read, or nothing arrived for `idle_timeout` seconds, whichever comes first; with no
        limit, until interrupted. Calls on_datagram(header, payload_bytes) for each datagram
        that brings new data (not for malformed ones or duplicates). Returns self.stats."""
        _positive("duration", duration)
        _positive("max_datagrams", max_datagrams, int)
        _positive("idle_timeout", idle_timeout)
        start = last_rx = time.monotonic()
        deadline = None if duration is None else start + duration
        count = 0
        try:
            while max_datagrams is None or count < max_datagrams:
                try:
                    data, anc, flags, addr = self.sock.recvmsg(MAX_DATAGRAM, ANC_BUFSIZE)
                except BlockingIOError:
                    # Only wait when the queue is empty: one syscall per datagram under load.
                    now = time.monotonic()
                    wait = None
                    if deadline is not None:
                        wait = deadline - now
                    if idle_timeout is not None:
                        idle = last_rx + idle_timeout - now
                        wait = idle if wait is None else min(wait, idle)
                    if wait is not None and wait <= 0:
                        break
                    self._poll.poll(None if wait is None else max(1, int(wait * 1000 + 0.999)))
                    continue
                count += 1
                last_rx = time.monotonic()
                self._account(data, anc, flags, on_datagram, addr)
                if deadline is not None and last_rx >= deadline:
                    break
        finally:
            self.stats.elapsed += time.monotonic() - start
            self._read_meminfo_drops()
        return self.stats

    def _account(self, data, anc, flags, on_datagram, addr=None):
        st = self.stats
        st.datagrams += 1
        st.bytes += len(data)
        for level, kind, cdata in anc:
            if level == socket.SOL_SOCKET and kind == SO_RXQ_OVFL and len(cdata) >= 4:
                self._note_drops(int.from_bytes(cdata[:4], sys.byteorder))
        if flags & socket.MSG_TRUNC:
            self._malformed("truncated", f"datagram must be at most {MAX_DATAGRAM} bytes")
            return
        try:
            h = daqformat.unpack_header(data)
        except daqformat.FormatError as e:
            self._malformed(_malformed_reason(data), str(e))
            return
        key = h.stream_id
        if self.by_source:
            key = (int(ipaddress.IPv4Address(addr[0])), addr[1], h.stream_id)
        if self._track(h, len(data) - daqformat.HEADER_LEN, key) and on_datagram is not None:
            on_datagram(h, data[daqformat.HEADER_LEN:])

    def _malformed(self, reason, message):
        self.stats.malformed[reason] = self.stats.malformed.get(reason, 0) + 1
        self.stats.malformed_last[reason] = message

    def _track(self, h, payload_len, key):
        """Sequence accounting for one valid datagram; True if it brings new data."""
        s = self.stats.streams.get(key)
        if s is None:
            s = self.stats.streams[key] = StreamStats(h.stream_id)
            self._streams[key] = OrderedDict()
        runs = self._streams[key]
        r = runs.get(h.run)
        if r is None:
            # A new run: seq restarts at 0, so a run change is no gap. Datagrams before the first
            # one we see of a later run were lost; of the very first run, we may just have
            # started late, so they are not counted.
            r = runs[h.run] = _Run(h.seq)
            if len(runs) > RUNS_TRACKED:
                runs.popitem(last=False)
            if s.runs and h.seq > 0:
                s.missing += h.seq
                r.add_gap(0, h.seq)
            s.runs += 1
            s.run = h.run
            s.last_seq = None
        elif h.seq > r.highest:
            if h.seq > r.highest + 1:
                s.missing += h.seq - r.highest - 1
                r.add_gap(r.highest + 1, h.seq)
            r.highest = h.seq
        elif r.fill(h.seq):
            s.missing -= 1
            s.out_of_order += 1
        else:
            s.duplicates += 1
            return False
        s.datagrams += 1
        s.samples += h.sample_count
        s.payload_bytes += payload_len
        s.sample_bits = h.sample_bits
        if s.first_seq is None:
            s.first_seq = h.seq
        if h.run == s.run:
            s.last_seq = r.highest
        if h.flags & daqformat.FLAG_OVERFLOW:
            s.overflow_flags += 1
        if h.flags & daqformat.FLAG_LAST:
            s.last_flags += 1
        if h.dropped > r.dropped:  # Cumulative, so the largest is the newest (late ones lag).
            s.board_dropped += h.dropped - r.dropped
            r.dropped = h.dropped
        return True

    def _note_drops(self, raw):
        """Fold in a reading of the socket's u32 drop counter. Readings can come out of order
        (a queued datagram carries the count from when it was queued), hence the sign check."""
        if self.stats.kernel_dropped is None:
            return
        delta = (raw - self._drops_raw) & 0xFFFFFFFF
        if 0 < delta < 2**31:
            self.stats.kernel_dropped += delta
            self._drops_raw = raw

    def _read_meminfo_drops(self):
        """SO_RXQ_OVFL only reports drops on a later datagram that made it into the queue, so
        drops at the end of a burst would go unseen; SO_MEMINFO reads the same counter now."""
        if self.sock.fileno() < 0 or not self.rxq_ovfl:
            return
        raw = _meminfo_drops(self.sock)
        if raw is not None:
            self._note_drops(raw)


def _meminfo_drops(sock):
    """The socket's kernel drop counter via SO_MEMINFO, or None (before Linux 4.6, not Linux)."""
    try:
        info = sock.getsockopt(socket.SOL_SOCKET, SO_MEMINFO, 4 * (SK_MEMINFO_DROPS + 1))
    except OSError:
        return None
    if len(info) < 4 * (SK_MEMINFO_DROPS + 1):
        return None
    return struct.unpack_from(f"={SK_MEMINFO_DROPS + 1}I", info)[SK_MEMINFO_DROPS]


def text_table(head, rows):
    """Right-aligned columns of strings, a rule under the head: (lines, rule)."""
    widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in [head] + rows]
    rule = "  ".join("-" * w for w in widths)
    lines.insert(1, rule)
    return lines, rule


def malformed_text(malformed):
    """'3 (bad magic 2, short 1)' from {reason: count}; '0' when empty."""
    text = str(sum(malformed.values()))
    if malformed:
        text += " (" + ", ".join(f"{k} {v}" for k, v in sorted(malformed.items())) + ")"
    return text


def lost_text(board_dropped, overflow_flags, missing):
    """Every loss in words of its own: samples the board dropped (and the datagrams that say so
    with FLAG_OVERFLOW), datagrams missing on the network."""
    board = f"lost on the board {board_dropped} samples"
    if overflow_flags:
        board += f" ({overflow_flags} datagrams flagged OVERFLOW)"
    return f"{board}; lost on the network {missing} datagrams"


def format_stats(stats):
    """Plain-text table: one row per stream, a total row, and a line for what has no stream."""
    def rate(nbytes):
        return f"{nbytes / MIB / stats.elapsed:.2f}" if stats.elapsed > 0 else "-"

    head = ["stream", "datagrams", "samples", "MiB/s", "missing", "out-of-order", "duplicates",
            "board-dropped", "overflow"]
    rows = []
    for sid in sorted(stats.streams):
        s = stats.streams[sid]
        rows.append([str(sid), str(s.datagrams), str(s.samples), rate(s.payload_bytes), str(s.missing),
                     str(s.out_of_order), str(s.duplicates), str(s.board_dropped), str(s.overflow_flags)])
    ss = stats.streams.values()
    rows.append(["total", str(sum(s.datagrams for s in ss)), str(sum(s.samples for s in ss)),
                 rate(stats.payload_bytes), str(stats.missing), str(sum(s.out_of_order for s in ss)),
                 str(sum(s.duplicates for s in ss)), str(sum(s.board_dropped for s in ss)),
                 str(sum(s.overflow_flags for s in ss))])
    lines, rule = text_table(head, rows)
    if stats.streams:
        lines.insert(len(lines) - 1, rule)

    kernel = "unknown" if stats.kernel_dropped is None else str(stats.kernel_dropped)
    malformed = malformed_text(stats.malformed)
    lines.append(f"{stats.datagrams} datagrams, {stats.bytes / MIB:.2f} MiB in {stats.elapsed:.2f} s: "
                 f"{stats.datagrams_per_s:.0f} datagrams/s, {stats.mib_per_s:.2f} MiB/s of samples; "
                 f"{lost_text(sum(s.board_dropped for s in ss), sum(s.overflow_flags for s in ss), stats.missing)}; "
                 f"malformed {malformed}; kernel drops {kernel}")
    return "\n".join(lines)


EXAMPLES = """\
examples:
  python -m ethdaq.host.receiver --duration 10              # port 5000, then print the table
  python -m ethdaq.host.receiver --port 5001 --count 100000
  python -m ethdaq.host.receiver --idle-timeout 2           # until the board stops sending
  python -m ethdaq.host.receiver                            # until Ctrl-C

Kernel drops need a big receive buffer to stay at 0: raise net.core.rmem_max (or run with
CAP_NET_ADMIN) if the buffer granted is smaller than asked.
"""


def make_parser():
    p = argtypes.OneLineParser(prog="python -m ethdaq.host.receiver", description="Receive DAQ datagrams over UDP "
                "and account for every loss.", epilog=EXAMPLES,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bind", default="0.0.0.0", help="local IPv4 address to listen on (default 0.0.0.0)")
    p.add_argument("--port", type=argtypes.port(0), default=DEFAULT_PORT,
                   help=f"UDP port (default {DEFAULT_PORT}; 0 = any free port)")
    p.add_argument("--duration", type=argtypes.positive("duration", float), help="stop after this many seconds")
    p.add_argument("--count", type=argtypes.positive("count", int), help="stop after this many datagrams")
    p.add_argument("--idle-timeout", type=argtypes.positive("idle timeout", float),
                   help="stop when nothing arrived for this many seconds")
    p.add_argument("--rcvbuf", type=argtypes.positive("rcvbuf", int), default=DEFAULT_RCVBUF,
                   help=f"socket receive buffer to ask for, bytes (default {DEFAULT_RCVBUF})")
    return p


def main(argv=None):
    args = make_parser().parse_args(argv)
    try:
        rx = Receiver(args.bind, args.port, rcvbuf=args.rcvbuf)
    except (ReceiverError, ValueError) as e:
        sys.stderr.write(f"Error: {e}\n")
        return 2
    with rx:
        note = " (capped: raise net.core.rmem_max)" if rx.rcvbuf_capped else ""
        sys.stderr.write(f"receiving on UDP {rx.bind_ip}:{rx.port}, receive buffer "
                         f"{rx.rcvbuf_granted / 2 / MIB:.1f} MiB of {args.rcvbuf / MIB:.1f} MiB asked{note}\n")
        try:
            rx.run(duration=args.duration, max_datagrams=args.count, idle_timeout=args.idle_timeout)
        except KeyboardInterrupt:
            pass  # Ctrl-C is how a run without limits ends; the table is still wanted.
        print(format_stats(rx.stats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
