"""Receive core (C, ethdaq.host.rxcore): crafted datagrams over loopback (127.0.0.x only), exact
counters for every kind of loss, the Batch it hands out byte for byte, its C structs against
numpy, socket options (buffer, reuseport, port in use), and a differential test against the
pure-Python reference model (ethdaq.host.receiver) on a seeded random mix.

Datagrams are sent before they are received (loopback queues them before sendto returns), so
nothing depends on timing; every receive loop has a deadline."""

import dataclasses
import os
import random
import signal
import socket
import subprocess
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO
from ethdaq.host import rxcore
from ethdaq.host.batch import PACKET_DTYPE, stream_key
from ethdaq.wire.daqformat import FLAG_LAST, FLAG_OVERFLOW, pack_header
from ethdaq.host.receiver import PortInUse, Receiver, ReceiverError
from ethdaq.host.rxcore import RcvbufWarning, RxCore, RxCoreMissing
from ethdaq.wire import daqformat

LOCAL = "127.0.0.1"
LOCAL_INT = 0x7F000001
SOURCE_DIR = REPO / "software" / "host" / "rxcore"


def datagram(stream_id, seq, sample_count=4, sample_bits=16, flags=0, dropped=0, run=0, ts=None):
    n = sample_bits // 8
    payload = b"".join(((seq * 7 + i) % 2**sample_bits).to_bytes(n, "big") for i in range(sample_count))
    ts = 1000 * seq if ts is None else ts
    return pack_header(stream_id, seq, ts, sample_count, sample_bits, flags, dropped, run) + payload


@pytest.fixture
def rx():
    with RxCore(LOCAL, 0) as r:
        yield r


@pytest.fixture
def tx():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((LOCAL, 0))
    yield s
    s.close()


def source(ip):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((ip, 0))
    return s


def send(sock, port, *datagrams):
    for d in datagrams:
        sock.sendto(d, (LOCAL, port))
    return len(datagrams)


def receive(rx, count, deadline=5.0):
    """Batches until `count` datagrams (valid or not) were read; fails instead of hanging."""
    batches = []
    end = time.monotonic() + deadline
    while rx.stats().datagrams < count:
        assert time.monotonic() < end, f"only {rx.stats().datagrams} of {count} datagrams arrived"
        b = rx.recv(timeout=0.05)
        if len(b):
            batches.append(b)
    return batches


def records(batches):
    """(key, seq, late, raw sample bytes) of every packet handed out, in order."""
    out = []
    for b in batches:
        for i, p in enumerate(b.packets):
            out.append((stream_key(p["src_ip"], p["src_port"], p["stream_id"]), int(p["seq"]),
                        int(p["late"]), bytes(b.raw(i))))
    return out


def only_stream(stats):
    assert len(stats.streams) == 1
    return next(iter(stats.streams.values()))


def counters(s, *names):
    return tuple(s[n] for n in names)


# --- The C side ----------------------------------------------------------------------------------

def test_generated_wire_format_header_is_current():
    assert (SOURCE_DIR / "daq_format.h").read_text() == daqformat.c_header()


def test_c_core_compiles_without_warnings(tmp_path):
    subprocess.run(["gcc", "-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", "-pedantic", "-fPIC", "-c",
                    str(SOURCE_DIR / "rxcore.c"), "-o", str(tmp_path / "rxcore.o")], check=True)


def test_packet_struct_is_packet_dtype():
    offsets, size = rxcore.packet_layout()
    assert size == PACKET_DTYPE.itemsize == 60
    assert list(offsets) == list(PACKET_DTYPE.names)
    assert offsets == {name: PACKET_DTYPE.fields[name][1] for name in PACKET_DTYPE.names}


def test_missing_or_stale_core_is_a_one_line_error(monkeypatch, tmp_path):
    monkeypatch.setattr(rxcore, "_lib", None)
    monkeypatch.setattr(rxcore, "library_path", lambda: None)
    with pytest.raises(RxCoreMissing, match=r"^the receive core is not built \(no _rxcore\*\.so in .*\): "
                                            r"run `make`, or `.venv/bin/python -m pip install -e .` in the repository$"):
        RxCore(LOCAL, 0)
    monkeypatch.undo()
    monkeypatch.setattr(rxcore, "_lib", None)
    (tmp_path / "rxcore.c").write_text("")
    so = rxcore.library_path()
    os.utime(tmp_path / "rxcore.c", (so.stat().st_mtime + 10,) * 2)
    monkeypatch.setattr(rxcore, "SOURCE_DIR", tmp_path)
    with pytest.raises(RxCoreMissing, match=f"^the receive core {so.name} is older than rxcore.c: "
                                            r"run `.venv/bin/python -m pip install -e .` in the repository$"):
        RxCore(LOCAL, 0)


# --- Accounting ----------------------------------------------------------------------------------

@pytest.mark.parametrize("kernel_timestamps", [False, True])
def test_two_streams_payload_byte_exact_in_the_batch(tx, kernel_timestamps):
    with RxCore(LOCAL, 0, kernel_timestamps=kernel_timestamps) as rx:
        two_streams_payload_byte_exact(rx, tx)
        assert rx.kernel_timestamps == kernel_timestamps


def two_streams_payload_byte_exact(rx, tx):
    sent = []
    for seq in range(10):
        sent.append(datagram(1, seq, sample_count=8, sample_bits=16))
        sent.append(datagram(2, seq, sample_count=3, sample_bits=32, flags=daqformat.FLAG_TS_PTP))
    sent += [datagram(3, 0, sample_count=5, sample_bits=8), datagram(4, 0, sample_count=3, sample_bits=24)]
    before = time.time_ns()
    n = send(tx, rx.port, *sent)
    batches = receive(rx, n)
    after = time.time_ns()
    assert len(batches) == 1  # All were queued, so one recvmmsg call takes them.
    b = batches[0]
    port = tx.getsockname()[1]
    p = b.packets
    assert len(b) == n
    assert list(p["stream_id"]) == [1, 2] * 10 + [3, 4]
    assert list(p["seq"]) == [q for q in range(10) for _ in (1, 2)] + [0, 0]
    assert set(p["src_ip"]) == {LOCAL_INT} and set(p["src_port"]) == {port}
    assert list(p["sample_count"][:2]) == [8, 3] and list(p["sample_bits"][:2]) == [16, 32]
    assert list(p["timestamp"][:4]) == [0, 0, 1000, 1000]
    assert list(p["flags"][:2]) == [0, daqformat.FLAG_TS_PTP]
    assert not p["late"].any() and not p["dropped"].any() and not p["run"].any()
    assert ((p["rx_time_ns"] >= before) & (p["rx_time_ns"] <= after)).all()
    if not rx.kernel_timestamps:  # One clock reading per recvmmsg call, and one call took them all.
        assert len(set(p["rx_time_ns"])) == 1 and rx.stats().recv_calls == 1
    assert list(p["offset"]) == list(np.cumsum([0] + [len(d) - 40 for d in sent])[:-1])
    assert b.payload.tobytes() == b"".join(d[40:] for d in sent)
    for i, d in enumerate(sent):
        assert bytes(b.raw(i)) == d[40:]
        assert list(b.samples(i)) == daqformat.samples(d)
    assert list(b.stream_samples((LOCAL_INT, port, 2))) == [(q * 7 + i) for q in range(10) for i in range(3)]
    assert list(b.samples(21)) == [0, 1, 2]  # 24-bit samples, widened.

    stats = rx.stats()
    assert list(stats.streams) == [(LOCAL_INT, port, sid) for sid in (1, 2, 3, 4)]
    s1, s2 = stats.streams[(LOCAL_INT, port, 1)], stats.streams[(LOCAL_INT, port, 2)]
    assert counters(s1, "datagrams", "samples", "payload_bytes", "sample_bits") == (10, 80, 160, 16)
    assert counters(s2, "datagrams", "samples", "payload_bytes", "sample_bits") == (10, 30, 120, 32)
    for s in (s1, s2):
        assert counters(s, "first_seq", "last_seq", "missing", "out_of_order", "duplicates") == (0, 9, 0, 0, 0)
        assert counters(s, "board_dropped", "overflow_flags", "runs", "run", "last_flags") == (0, 0, 1, 0, 0)
    assert (stats.datagrams, stats.delivered, stats.bytes) == (n, n, sum(len(d) for d in sent))
    assert stats.delivered_bytes == stats.payload_bytes == b.payload.size
    assert stats.malformed == {} and stats.kernel_dropped == 0 and stats.table_full == 0


def test_gap_of_three_datagrams_counts_three_missing(rx, tx):
    n = send(tx, rx.port, *(datagram(7, seq) for seq in (0, 1, 5, 6)))
    receive(rx, n)
    s = only_stream(rx.stats())
    assert counters(s, "datagrams", "missing", "out_of_order", "duplicates", "last_seq") == (4, 3, 0, 0, 6)


def test_duplicates_are_counted_and_not_handed_out_late_ones_fill_their_gap(rx, tx):
    n = send(tx, rx.port, *(datagram(3, seq) for seq in (0, 1, 3, 2, 2, 4, 0)))
    got = records(receive(rx, n))
    assert [(seq, late) for _, seq, late, _ in got] == [(0, 0), (1, 0), (3, 0), (2, 1), (4, 0)]
    stats = rx.stats()
    s = only_stream(stats)
    assert counters(s, "out_of_order", "missing", "duplicates", "datagrams", "samples", "last_seq") == (1, 0, 2, 5, 20, 4)
    assert (stats.datagrams, stats.delivered, stats.duplicates) == (7, 5, 2)


def test_late_datagram_in_the_middle_of_a_gap_leaves_the_rest_missing(rx, tx):
    n = send(tx, rx.port, *(datagram(3, seq) for seq in (0, 6, 3, 3, 5)))
    receive(rx, n)
    s = only_stream(rx.stats())
    assert counters(s, "datagrams", "missing", "out_of_order", "duplicates") == (4, 3, 2, 1)  # 1, 2, 4 missing.


def test_run_changes(rx, tx):
    n = send(tx, rx.port, *[datagram(1, seq, run=7, flags=FLAG_LAST if seq == 4 else 0) for seq in range(5)],
             *[datagram(1, seq, run=8) for seq in range(3)],
             datagram(1, 3, run=7),   # Late, of the previous run: a duplicate of it, not of run 8.
             datagram(1, 5, run=9),   # Later run whose first 5 datagrams were lost.
             datagram(1, 3, run=9))   # One of them, late.
    got = records(receive(rx, n))
    assert [(seq, late) for _, seq, late, _ in got][-3:] == [(2, 0), (5, 0), (3, 1)]
    s = only_stream(rx.stats())
    assert counters(s, "datagrams", "missing", "out_of_order", "duplicates") == (10, 4, 1, 1)
    assert counters(s, "runs", "run", "first_seq", "last_seq", "last_flags") == (3, 9, 0, 5, 1)


def test_a_first_run_seen_late_is_not_missing(rx, tx):
    n = send(tx, rx.port, datagram(1, 100, run=1), datagram(1, 101, run=1), datagram(1, 2, run=2))
    receive(rx, n)
    s = only_stream(rx.stats())
    assert counters(s, "first_seq", "missing", "runs", "last_seq") == (100, 2, 2, 2)


def test_board_dropped_samples_and_overflow_flags(rx, tx):
    n = send(tx, rx.port,
             datagram(4, 0, dropped=0),
             datagram(4, 1, dropped=100, flags=FLAG_OVERFLOW),
             datagram(4, 3, dropped=250, flags=FLAG_OVERFLOW),
             datagram(4, 2, dropped=100),                       # Late: its `dropped` lags, adds nothing.
             datagram(4, 1, dropped=100, flags=FLAG_OVERFLOW),  # Duplicate: counts nothing again.
             datagram(4, 0, dropped=10, flags=FLAG_OVERFLOW, run=1),  # `dropped` restarts per run.
             datagram(5, 0))
    got = receive(rx, n)
    stats = rx.stats()
    port = tx.getsockname()[1]
    s4, s5 = stats.streams[(LOCAL_INT, port, 4)], stats.streams[(LOCAL_INT, port, 5)]
    assert counters(s4, "board_dropped", "overflow_flags", "duplicates", "out_of_order") == (260, 3, 1, 1)
    assert counters(s5, "board_dropped", "overflow_flags") == (0, 0)
    p = np.concatenate([b.packets for b in got])
    assert list(p["dropped"]) == [0, 100, 250, 100, 10, 0]  # As the board sent them.


def test_malformed_datagrams_are_counted_per_reason_and_skipped(tx):
    good = datagram(9, 0)

    def patched(offset, value):
        d = bytearray(good)
        d[offset] = value
        return bytes(d)

    bad = [b"", good[:39], b"\xda\x7a",                          # short
           patched(0, 0x12),                                    # bad magic
           patched(2, 2),                                       # bad version
           patched(3, 44),                                      # bad header_len
           patched(34, 12), patched(34, 0),                     # bad sample_bits
           good + b"\x00", good[:-1],                           # wrong length
           datagram(9, 1, sample_count=300, sample_bits=16)]    # 640 bytes: truncated at 600
    with RxCore(LOCAL, 0, max_datagram=600) as rx:
        n = send(tx, rx.port, good, *bad, datagram(9, 1))
        got = records(receive(rx, n))
        stats = rx.stats()
    assert stats.malformed == {"short": 3, "bad magic": 1, "bad version": 1, "bad header_len": 1,
                               "bad sample_bits": 2, "wrong length": 2, "truncated": 1}
    assert stats.malformed_total == len(bad) and stats.datagrams == n
    assert stats.bytes == sum(len(d) for d in [good, datagram(9, 1)] + bad[:-1]) + 600
    assert [seq for _, seq, _, _ in got] == [0, 1]
    s = only_stream(stats)
    assert counters(s, "datagrams", "missing", "last_seq") == (2, 0, 1)
    # The reasons are the reference model's names for the same datagrams.
    from ethdaq.host.receiver import _malformed_reason
    assert sorted({_malformed_reason(d) for d in bad[:-1]}) == sorted(set(stats.malformed) - {"truncated"})


def test_several_sources_with_the_same_stream_id_are_kept_apart():
    sources = [source(f"127.0.0.{i}") for i in (2, 3, 4)]
    try:
        with RxCore("0.0.0.0", 0) as rx:
            a, b, c = sources
            n = send(a, rx.port, *(datagram(0, seq) for seq in range(5)))            # complete
            n += send(b, rx.port, *(datagram(0, seq) for seq in (0, 2, 4)))         # 2 missing
            n += send(c, rx.port, *(datagram(0, seq, run=3) for seq in (0, 1, 1)))  # 1 duplicate
            n += send(a, rx.port, datagram(1, 0))                                    # same source, stream 1
            got = records(receive(rx, n))
            stats = rx.stats()
        keys = [stream_key(int.from_bytes(socket.inet_aton(s.getsockname()[0]), "big"), s.getsockname()[1], 0)
                for s in sources]
        assert list(stats.streams) == keys + [keys[0][:2] + (1,)]
        sa, sb, sc = (stats.streams[k] for k in keys)
        assert counters(sa, "datagrams", "missing", "duplicates", "last_seq") == (5, 0, 0, 4)
        assert counters(sb, "datagrams", "missing", "duplicates", "last_seq") == (3, 2, 0, 4)
        assert counters(sc, "datagrams", "missing", "duplicates", "run") == (2, 0, 1, 3)
        assert [k for k, *_ in got] == [keys[0]] * 5 + [keys[1]] * 3 + [keys[2]] * 2 + [keys[0][:2] + (1,)]
    finally:
        for s in sources:
            s.close()


def test_stream_table_full_is_counted_never_silent(tx):
    with RxCore(LOCAL, 0, max_streams=2) as rx:
        n = send(tx, rx.port, datagram(1, 0), datagram(2, 0), datagram(3, 0), datagram(1, 1),
                 datagram(3, 1), datagram(4, 0), b"junk")
        got = records(receive(rx, n))
        stats = rx.stats()
    assert [(k[2], seq) for k, seq, _, _ in got] == [(1, 0), (2, 0), (1, 1)]
    assert stats.table_full == 3 and stats.malformed == {"short": 1}
    assert [k[2] for k in stats.streams] == [1, 2]
    assert stats.datagrams == n and stats.delivered == 3


def test_gap_ranges_are_bounded_like_the_reference(tx):
    # 4096 gaps of 3 (seq 0, 4, 8, ...): the table is full. Splitting the oldest forgets its
    # lower part; splitting another forgets the oldest. Then late ones fill what is still known.
    seqs = [4 * i for i in range(4097)] + [2, 1, 10, 3, 9, 11, 5]
    with RxCore(LOCAL, 0) as rx:
        got = []
        for start in range(0, len(seqs), 500):  # Drained as we go: small kernel buffers suffice.
            n = send(tx, rx.port, *(datagram(1, seq, sample_count=1) for seq in seqs[start:start + 500]))
            got += records(receive(rx, start + n))
        s = only_stream(rx.stats())
    assert [(seq, late) for _, seq, late, _ in got[4097:]] == [(2, 1), (10, 1), (9, 1), (11, 1), (5, 1)]
    assert counters(s, "datagrams", "duplicates", "out_of_order", "missing") == (4102, 2, 5, 3 * 4096 - 5)

    with Receiver(LOCAL, 0) as ref:  # The model gives the same, fed the same headers directly.
        for seq in seqs:
            ref._track(daqformat.unpack_header(datagram(1, seq, sample_count=1)), 2, 1)
    assert dataclasses.asdict(ref.stats.streams[1]) == s


# --- Kernel side: drops, buffer, busy polling, ports ----------------------------------------------

def overflow_a_tiny_buffer(tx):
    """A core whose buffer is the kernel minimum (a couple of datagrams) and many datagrams sent
    to it while nobody reads: most are dropped by the kernel."""
    # Without GRO: only then does the kernel count dropped datagrams (with it, dropped buffers).
    rx = RxCore(LOCAL, 0, rcvbuf=1, gro=False)
    assert rx.rcvbuf_granted < 10000 and not rx.rcvbuf_capped  # More than 1 byte asked...
    return rx, send(tx, rx.port, *(datagram(1, seq, sample_count=256) for seq in range(300)))


def drain(rx):
    got = 0
    while True:
        b = rx.recv(timeout=0.2)
        if not len(b):
            return got
        got += len(b)


def test_kernel_drops_add_up_with_what_was_received(tx):
    rx, sent = overflow_a_tiny_buffer(tx)
    with rx:
        received = drain(rx)
        stats = rx.stats()  # SO_MEMINFO: the drops at the tail of the burst are known now.
        assert 0 < received < sent
        assert received + stats.kernel_dropped == sent
        send(tx, rx.port, datagram(1, sent))  # ...and the next datagram shows them as a gap.
        assert len(rx.recv(timeout=1)) == 1
        assert only_stream(rx.stats())["missing"] == rx.stats().kernel_dropped == sent - received


def test_kernel_drops_arrive_in_band_with_so_rxq_ovfl(tx):
    rx, sent = overflow_a_tiny_buffer(tx)
    with rx:
        received = drain(rx)
        assert rx._stats(meminfo=False).kernel_dropped < sent - received  # Tail drops not seen yet.
        send(tx, rx.port, datagram(1, sent))
        assert len(rx.recv(timeout=1)) == 1
        assert rx._stats(meminfo=False).kernel_dropped == sent - received


def test_kernel_drop_readings_out_of_order_count_once(tx):
    # Queued datagrams carry the drop count from when they were queued, older than SO_MEMINFO's.
    rx, sent = overflow_a_tiny_buffer(tx)
    with rx:
        received = drain(rx)
        sent += send(tx, rx.port, *(datagram(1, seq, sample_count=256) for seq in range(sent, sent + 300)))
        assert rx.stats().kernel_dropped < sent - received  # Read before the queue is drained...
        received += drain(rx)                                # ...whose datagrams carry older counts.
        assert rx.stats().kernel_dropped == sent - received


def test_receive_buffer_grant_and_cap_are_reported():
    rmem_max = int(Path("/proc/sys/net/core/rmem_max").read_text())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with RxCore(LOCAL, 0, rcvbuf=rmem_max // 2, rcvbuf_force=False) as rx:
            assert (rx.rcvbuf_granted, rx.rcvbuf_capped, rx.rcvbuf_forced) == (rmem_max // 2, False, False)
            assert rx.rcvbuf_warning() is None
    asked = 2 * rmem_max + 4096
    with pytest.warns(RcvbufWarning) as w:
        rx = RxCore(LOCAL, 0, rcvbuf=asked, rcvbuf_force=False)
    with rx:
        assert (rx.rcvbuf_granted, rx.rcvbuf_capped) == (rmem_max, True)
        assert str(w[0].message) == rx.rcvbuf_warning()
        assert f"raise net.core.rmem_max (sysctl -w net.core.rmem_max={asked})" in rx.rcvbuf_warning()
    if os.geteuid() == 0:  # CAP_NET_ADMIN: SO_RCVBUFFORCE goes past rmem_max.
        with RxCore(LOCAL, 0, rcvbuf=asked) as rx:
            assert (rx.rcvbuf_granted, rx.rcvbuf_capped, rx.rcvbuf_forced) == (asked, False, True)


def test_default_receive_buffer_is_64_mib():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RcvbufWarning)
        with RxCore(LOCAL, 0) as rx:
            assert rx.rcvbuf_requested == 64 * 2**20
            assert rx.rcvbuf_capped == (rx.rcvbuf_granted < 64 * 2**20)


def test_busy_polling_is_set_or_its_refusal_reported():
    if os.geteuid() == 0:
        with RxCore(LOCAL, 0, busy_poll_us=50) as rx:
            assert (rx.busy_poll_us, rx.busy_poll_error) == (50, None)
    else:
        with pytest.warns(rxcore.BusyPollWarning, match="SO_BUSY_POLL of 50 us refused"):
            rx = RxCore(LOCAL, 0, busy_poll_us=50)
        rx.close()
    with RxCore(LOCAL, 0) as rx:
        assert rx.busy_poll_us == 0


def test_port_in_use_is_a_clear_error(tx):
    port = tx.getsockname()[1]
    with pytest.raises(PortInUse) as e:
        RxCore(LOCAL, port)
    assert str(e.value) == (f"UDP port {port} is already in use on {LOCAL} "
                            f"(another receiver running? use --reuseport to share it)")
    with RxCore(LOCAL, 0) as first:
        with pytest.raises(PortInUse, match=f"^UDP port {first.port} is already in use"):
            RxCore(LOCAL, first.port)
        with pytest.raises(PortInUse):  # Sharing needs both to ask for it.
            RxCore(LOCAL, first.port, reuseport=True)


def test_bind_to_an_address_not_here_is_a_clear_error():
    with pytest.raises(ReceiverError, match=r"^cannot bind UDP 192\.0\.2\.1:0: Cannot assign requested address$"):
        RxCore("192.0.2.1", 0)


def test_reuseport_shares_a_port_and_keeps_each_source_in_one_core():
    sources = [source(f"127.0.0.{2 + i % 8}") for i in range(32)]
    try:
        with RxCore(LOCAL, 0, reuseport=True) as a, RxCore(LOCAL, a.port, reuseport=True) as b:
            assert a.port == b.port
            total = sum(send(s, a.port, *(datagram(0, seq) for seq in range(5))) for s in sources)
            end = time.monotonic() + 5
            while a.stats().datagrams + b.stats().datagrams < total:
                assert time.monotonic() < end
                a.recv(timeout=0.01)
                b.recv(timeout=0.01)
            sa, sb = a.stats(), b.stats()
        assert sa.datagrams > 0 and sb.datagrams > 0  # The kernel spread the 32 sources over both.
        assert sa.datagrams + sb.datagrams == sa.delivered + sb.delivered == total
        assert set(sa.streams).isdisjoint(sb.streams) and len(sa.streams) + len(sb.streams) == 32
        for s in list(sa.streams.values()) + list(sb.streams.values()):
            assert counters(s, "datagrams", "missing", "duplicates") == (5, 0, 0)
    finally:
        for s in sources:
            s.close()


# --- The Python front end -------------------------------------------------------------------------

def test_recv_limits_and_timeouts(tx):
    with RxCore(LOCAL, 0, max_packets=4, max_payload_bytes=1000, max_datagram=500) as rx:
        n = send(tx, rx.port, *(datagram(1, seq, sample_count=100) for seq in range(8)))  # 200 sample bytes each
        sizes = []
        while sum(sizes) < n:
            b = rx.recv(timeout=1)
            assert len(b) > 0
            sizes.append(len(b))
        # The core only asks for as many datagrams as fit if all had 460 sample bytes: 2 fit in
        # 1000 bytes, then 1 in the 600 left, then none: 3, though 4 records would fit.
        assert sizes == [3, 3, 2]
        t = time.monotonic()
        assert len(rx.recv(timeout=0)) == 0
        assert time.monotonic() - t < 0.05
        t = time.monotonic()
        empty = rx.recv(timeout=0.1)
        assert 0.09 < time.monotonic() - t < 1.0
        assert empty.packets.dtype == PACKET_DTYPE and len(empty) == 0 and empty.payload.size == 0
    with RxCore(LOCAL, 0, max_packets=3) as rx:
        n = send(tx, rx.port, *(datagram(1, seq) for seq in range(8)))
        assert [len(rx.recv(timeout=1)) for _ in range(3)] == [3, 3, 2]


def test_a_truncation_or_drop_count_in_one_call_does_not_carry_over_to_later_calls(tx):
    # A truncated datagram (MSG_TRUNC) and kernel-drop cmsgs in one call must not carry over to
    # the datagrams later calls read into the same message slots.
    with RxCore(LOCAL, 0, max_datagram=200, batch=4) as rx:
        send(tx, rx.port, datagram(1, 0, sample_count=100), datagram(1, 1), datagram(1, 2))  # 240 > 200 bytes
        assert list(rx.recv(timeout=1).packets["seq"]) == [1, 2]
        for seq in range(3, 11):
            send(tx, rx.port, datagram(1, seq))
            assert list(rx.recv(timeout=1).packets["seq"]) == [seq]
        stats = rx.stats()
        assert stats.malformed == {"truncated": 1} and stats.datagrams == 11 and stats.delivered == 10
    rx, sent = overflow_a_tiny_buffer(tx)
    with rx:
        received = drain(rx)
        for seq in range(sent, sent + 600):  # Past the ring several times, one datagram per call.
            send(tx, rx.port, datagram(1, seq))
            assert len(rx.recv(timeout=1)) == 1
        assert rx._stats(meminfo=False).kernel_dropped == sent - received
        assert rx.stats().delivered == received + 600 and rx.stats().malformed == {}


# --- UDP GRO: runs of datagrams read as one buffer -------------------------------------------------

UDP_SEGMENT = 103  # linux/udp.h


def send_gso(sock, port, *datagrams):
    """One UDP GSO send: the datagrams, all as long as the first but the last (which may be
    shorter), leave as one buffer; on loopback the kernel hands it whole to a GRO socket."""
    size = len(datagrams[0])
    assert all(len(d) == size for d in datagrams[:-1]) and len(datagrams[-1]) <= size
    sock.setsockopt(socket.IPPROTO_UDP, UDP_SEGMENT, size)
    try:
        sock.sendto(b"".join(datagrams), (LOCAL, port))
    finally:
        sock.setsockopt(socket.IPPROTO_UDP, UDP_SEGMENT, 0)
    return len(datagrams)


def test_gro_buffers_are_split_into_their_datagrams_byte_exact(tx):
    run1 = [datagram(3, seq, sample_count=20) for seq in range(40)] + [datagram(3, 40, sample_count=7)]
    bad = bytearray(datagram(3, 42, sample_count=20))
    bad[0] = 0x12                                                       # bad magic, mid-run
    run2 = [datagram(3, 41, sample_count=20), bytes(bad), datagram(3, 43, sample_count=20),
            datagram(3, 41, sample_count=20)]                           # a duplicate in the run
    run3 = [datagram(4, seq, sample_count=100, sample_bits=32) for seq in (0, 1, 3)]  # seq 2 missing
    with RxCore(LOCAL, 0) as rx:
        assert rx.gro_active and rx.gro_error is None
        n = send_gso(tx, rx.port, *run1) + send_gso(tx, rx.port, *run2) + send_gso(tx, rx.port, *run3)
        got = records(receive(rx, n))
        stats = rx.stats()
    port = tx.getsockname()[1]
    expect = [d for d in run1 + run2[:1] + run2[2:3] + run3]
    assert [(k, seq, bytes(raw)) for k, seq, _, raw in got] == \
        [(stream_key(LOCAL_INT, port, d[5]), int.from_bytes(d[8:16], "big"), d[40:]) for d in expect]
    assert stats.buffers == 3 and stats.datagrams == n == 48  # Merged on the way, split here.
    assert stats.malformed == {"bad magic": 1} and stats.kernel_dropped == 0
    assert counters(stats.streams[(LOCAL_INT, port, 3)], "datagrams", "duplicates", "missing") == (43, 1, 1)
    assert counters(stats.streams[(LOCAL_INT, port, 4)], "datagrams", "missing", "last_seq") == (3, 1, 3)


def test_gro_and_plain_reading_count_the_same(tx):
    # The same mixed traffic, once read merged and once datagram by datagram: same records, same
    # counters (only the number of buffers differs).
    rng = random.Random(7)
    traffic = []
    for _ in range(30):
        sid, start, count = rng.randrange(3), rng.randrange(200), rng.randrange(1, 30)
        size = rng.choice([4, 50, 300])
        run = [datagram(sid, seq, sample_count=size) for seq in range(start, start + count)]
        traffic.append(run)
    results = []
    for gro in (True, False):
        with RxCore(LOCAL, 0, gro=gro) as rx:
            n = sum(send_gso(tx, rx.port, *run) if gro else send(tx, rx.port, *run) for run in traffic)
            got = records(receive(rx, n))
            stats = rx.stats()
        results.append((got, stats))
    (g1, s1), (g2, s2) = results
    assert [r[1:] for r in g1] == [r[1:] for r in g2]
    assert {k[2]: v for k, v in s1.streams.items()} == {k[2]: v for k, v in s2.streams.items()}
    assert s1.datagrams == s2.datagrams == s2.buffers > s1.buffers


def test_a_gro_buffer_larger_than_the_batch_is_handed_out_over_several_calls(tx):
    with RxCore(LOCAL, 0) as rx:
        send_gso(tx, rx.port, *(datagram(1, seq) for seq in range(50)))
        seqs, sizes = [], []
        first = rx.recv(timeout=5, max_packets=8)
        seqs += list(first.packets["seq"])
        sizes.append(len(first))
        old = signal.signal(signal.SIGALRM, lambda *a: pytest.fail("recv() waited with datagrams pending"))
        signal.alarm(10)
        try:
            while rx.pending:
                b = rx.recv(timeout=None, max_packets=8)  # Must not wait: the rest is in the core.
                seqs += list(b.packets["seq"])
                sizes.append(len(b))
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)
        assert seqs == list(range(50)) and sizes == [8] * 6 + [2]
        stats = rx.stats()
        assert stats.buffers == 1 and stats.datagrams == stats.delivered == 50
        # Room for samples limits a call the same way as the record count.
        send_gso(tx, rx.port, *(datagram(2, seq, sample_count=1000) for seq in range(30)))
        got = [len(rx.recv(timeout=5))]
        while rx.pending:
            got.append(len(rx.recv(timeout=0)))
        assert sum(got) == 30 and rx.stats().delivered == 80


def test_with_gro_the_kernel_counts_dropped_buffers_and_gaps_count_the_datagrams(tx):
    with RxCore(LOCAL, 0, rcvbuf=1) as rx:
        sent = 0
        for k in range(40):
            sent += send_gso(tx, rx.port, *(datagram(1, seq, sample_count=200) for seq in range(sent, sent + 30)))
        received = drain(rx)
        stats = rx.stats()
        assert 0 < received < sent
        # The kernel's counter says how many buffers of up to 64 datagrams it dropped, not how many
        # datagrams: the datagram count is unknown, not a wrong number.
        assert stats.kernel_dropped is None and 0 < stats.kernel_dropped_buffers < sent - received
        send(tx, rx.port, datagram(1, sent))  # The next datagram shows every lost one as a gap.
        assert len(rx.recv(timeout=1)) == 1
        assert only_stream(rx.stats())["missing"] == sent - received
    from ethdaq.host.recv import kernel_drops_text
    assert kernel_drops_text(rx.stats()).startswith(f"unknown ({stats.kernel_dropped_buffers} buffers")


def test_a_batch_stays_valid_after_the_next_recv(rx, tx):
    send(tx, rx.port, datagram(1, 0))
    first = rx.recv(timeout=1)
    send(tx, rx.port, datagram(1, 1))
    second = rx.recv(timeout=1)
    assert (int(first.packets[0]["seq"]), int(second.packets[0]["seq"])) == (0, 1)
    assert bytes(first.raw(0)) == datagram(1, 0)[40:] and first.payload.base is None


def test_stats_survive_close_and_recv_after_close_is_an_error(tx):
    rx = RxCore(LOCAL, 0)
    send(tx, rx.port, datagram(1, 0), datagram(1, 2))
    receive(rx, 2)
    rx.close()
    rx.close()
    assert rx.stats().datagrams == 2 and only_stream(rx.stats())["missing"] == 1
    with pytest.raises(ReceiverError, match=r"^recv\(\) on a closed RxCore$"):
        rx.recv()


@pytest.mark.parametrize("kwargs, message", [
    (dict(port=70000), "port must be an integer in 0..65535, not 70000"),
    (dict(port="5000"), "port must be an integer in 0..65535, not '5000'"),
    (dict(bind="localhost"), "bind must be dotted IPv4 like 0.0.0.0, not 'localhost'"),
    (dict(rcvbuf=0), "rcvbuf must be a positive number of bytes up to 2147483647, not 0"),
    (dict(busy_poll_us=-1), "busy_poll_us must be a non-negative number of microseconds, not -1"),
    (dict(reuseport=1), "reuseport must be True or False, not 1"),
    (dict(max_packets=0), "max_packets must be an integer in 1..16777216, not 0"),
    (dict(max_datagram=40), "max_datagram must be an integer in 41..65536, not 40"),
    (dict(max_datagram=1000, max_payload_bytes=959), "max_payload_bytes must be at least max_datagram - 40 = 960 bytes, not 959"),
    (dict(batch=1025), "batch must be an integer in 1..1024, not 1025"),
    (dict(gro=1), "gro must be True or False, not 1"),
    (dict(max_streams=0), "max_streams must be an integer in 1..65536, not 0"),
    (dict(kernel_timestamps=1), "kernel_timestamps must be True or False, not 1"),
])
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=f"^{message}$"):
        RxCore(**{"bind": LOCAL, "port": 0, **kwargs})


@pytest.mark.parametrize("timeout", [-1, "1", True])
def test_bad_timeout(rx, timeout):
    with pytest.raises(ValueError, match=f"^timeout must be a non-negative number of seconds or None, not {timeout!r}$"):
        rx.recv(timeout)


# --- Differential: the C core against the Python reference model ----------------------------------

MALFORMERS = [
    lambda d: d[:random.Random(len(d)).randrange(40)],          # short
    lambda d: b"\x12" + d[1:],                                   # bad magic
    lambda d: d[:2] + b"\x07" + d[3:],                           # bad version
    lambda d: d[:3] + b"\x30" + d[4:],                           # bad header_len
    lambda d: d[:34] + b"\x0c" + d[35:],                         # bad sample_bits
    lambda d: d + b"\x00\x01",                                   # wrong length
]


def random_traffic(rng, nsources):
    """Per stream: several runs (more than the 4 tracked), each losing, duplicating and
    reordering datagrams, with board drops and overflow/last flags; old runs' datagrams
    arriving late; malformed datagrams; all streams interleaved at random."""
    streams = []
    for src in range(nsources):
        for sid in rng.sample(range(3), rng.randint(1, 2)):
            out = []
            bits = rng.choice([8, 16, 24, 32])
            sent_before = []
            for run in range(rng.randint(1, 7)):
                first = rng.choice([0, 0, rng.randint(1, 5)])
                count = rng.randint(20, 60)
                dropped = 0
                run_dgrams = []
                for seq in range(first, first + count):
                    flags = 0
                    if rng.random() < 0.1:
                        dropped += rng.randint(1, 50)
                        flags |= FLAG_OVERFLOW
                    if seq == first + count - 1:
                        flags |= FLAG_LAST
                    run_dgrams.append(datagram(sid, seq, rng.randint(0, 12), bits, flags, dropped, run))
                stream = []
                for d in run_dgrams:
                    r = rng.random()
                    if r < 0.15:
                        continue                                          # lost
                    stream.append(d)
                    if r < 0.25:
                        stream.append(d)                                  # duplicate
                    if r > 0.95 and sent_before:
                        stream.append(rng.choice(sent_before))            # a previous run's, late
                for _ in range(len(stream) // 6):                         # reorder
                    i = rng.randrange(len(stream))
                    j = min(len(stream) - 1, i + rng.randint(1, 6))
                    stream[i], stream[j] = stream[j], stream[i]
                out += stream
                sent_before += run_dgrams
            for _ in range(rng.randint(0, 3)):
                out.insert(rng.randrange(len(out) + 1), rng.choice(MALFORMERS)(rng.choice(out)))
            streams.append((src, out))
    mixed = []
    while streams:  # Interleave, keeping each stream's own order.
        k = rng.randrange(len(streams))
        src, out = streams[k]
        mixed.append((src, out.pop(0)))
        if not out:
            streams.pop(k)
    return mixed


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_core_and_reference_model_agree(seed):
    rng = random.Random(seed)
    nsources = 4
    sources = [source(f"127.0.0.{10 + i}") for i in range(nsources)]
    traffic = random_traffic(rng, nsources)
    try:
        with RxCore(LOCAL, 0) as core, Receiver(LOCAL, 0, by_source=True) as ref:
            core_got, ref_got = [], []

            def on_datagram(h, payload):
                ref_got.append((h.seq, bytes(payload)))

            for start in range(0, len(traffic), 200):  # Drained as we go: small buffers suffice.
                chunk = traffic[start:start + 200]
                for src, d in chunk:
                    sources[src].sendto(d, (LOCAL, core.port))
                    sources[src].sendto(d, (LOCAL, ref.port))
                core_got += records(receive(core, start + len(chunk)))
                ref.run(max_datagrams=len(chunk), idle_timeout=5, on_datagram=on_datagram)
            cs, rs = core.stats(), ref.stats
        assert cs.datagrams == rs.datagrams == len(traffic) > 500
        assert cs.bytes == rs.bytes
        assert cs.malformed == rs.malformed and cs.malformed_total > 0
        assert cs.kernel_dropped == rs.kernel_dropped == 0
        assert list(cs.streams) == list(rs.streams)
        for key, s in rs.streams.items():
            assert cs.streams[key] == dataclasses.asdict(s), key
        assert [(seq, raw) for _, seq, _, raw in core_got] == ref_got
        # The mix did exercise every kind of accounting.
        total = {f: sum(s[f] for s in cs.streams.values()) for f in ("missing", "out_of_order", "duplicates",
                                                                      "board_dropped", "overflow_flags", "last_flags")}
        assert all(total.values()), total
        assert max(s["runs"] for s in cs.streams.values()) > 4
    finally:
        for s in sources:
            s.close()


# --- Robustness: random bytes under the sanitizers --------------------------------------------------

FUZZ_MAIN = r"""
#include <arpa/inet.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include "rxcore.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif

/* Random datagram of at most `max` bytes into d, mostly with a near-valid header. */
static size_t random_datagram(uint8_t *d, size_t max, size_t len, unsigned *seed)
{
	for (size_t k = 0; k < len; k++)
		d[k] = rand_r(seed);
	if (len >= 40 && rand_r(seed) % 4) {  /* Make most headers pass the first checks. */
		unsigned count = rand_r(seed) % 40, bits = 8 * (1 + rand_r(seed) % 4);
		d[0] = 0xDA; d[1] = 0x7A; d[2] = 1; d[3] = 40;
		d[4] = 0; d[5] = rand_r(seed) % 12;  /* stream_id: more than max_streams */
		memset(d + 8, 0, 6); d[14] = 0; d[15] = rand_r(seed) % 64;  /* seq */
		d[32] = 0; d[33] = count; d[34] = bits; d[36] = d[37] = d[38] = 0; d[39] = rand_r(seed) % 6;
		if (rand_r(seed) % 8 && 40 + count * bits / 8 <= max)
			len = 40 + count * bits / 8;
	}
	return len;
}

/* Random datagrams through the whole receive path. With an argument: the core reads with GRO and
 * half the sends are UDP GSO buffers (runs of datagrams of one length, the last maybe shorter),
 * which loopback hands over whole, so the core splits them; and the core is asked for few
 * records at a time, so merged buffers are handed out over several calls. */
int main(int argc, char **argv)
{
	int gro = argc > 1 && argv[1][0];
	struct rx_config cfg = {0x7F000001u, 0, 1 << 24, 1, 0, 0, 8, 64, 1200, 1, gro};
	struct rx_info info;
	struct rx_core *c = rx_open(&cfg, &info);
	static struct rx_packet pk[256];
	static uint8_t payload[256 * 1200];
	uint64_t used, got = 0, sent = 0;
	int tx = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(info.port), .sin_addr.s_addr = htonl(0x7F000001u)};
	static uint8_t d[65000];
	unsigned seed = 1;

	if (!c || tx < 0 || info.gro != gro)
		return 2;
	for (int round = 0; round < 200; round++) {
		for (int i = 0; i < 100; i++) {
			if (gro && rand_r(&seed) % 2) {
				int seg = 1 + rand_r(&seed) % 1400, segs = 2 + rand_r(&seed) % 40;
				size_t len = 0;
				for (int k = 0; k < segs; k++) {
					size_t want = k == segs - 1 ? 1 + (size_t)(rand_r(&seed) % seg) : (size_t)seg;
					size_t got_len = random_datagram(d + len, seg, want, &seed);
					/* A run is one length: a header that asks for another length keeps `want`. */
					len += k == segs - 1 ? got_len : (size_t)seg;
				}
				if (setsockopt(tx, SOL_UDP, UDP_SEGMENT, &seg, sizeof seg) < 0)
					return 4;
				if (sendto(tx, d, len, 0, (struct sockaddr *)&to, sizeof to) == (ssize_t)len)
					sent += (len + seg - 1) / seg;
				seg = 0;
				setsockopt(tx, SOL_UDP, UDP_SEGMENT, &seg, sizeof seg);
			} else {
				size_t len = random_datagram(d, 1400, rand_r(&seed) % 1400, &seed);
				if (sendto(tx, d, len, 0, (struct sockaddr *)&to, sizeof to) == (ssize_t)len)
					sent++;
			}
		}
		int n;
		uint32_t max = gro ? 1 + rand_r(&seed) % 50 : 256;
		while ((n = rx_recv(c, pk, max, payload, sizeof payload, &used, 0)) > 0)
			got += n;
		if (n < 0)
			return 3;
	}
	struct rx_totals t;
	rx_totals(c, &t, 1);
	uint64_t mal = 0;
	for (int i = 0; i < RX_MAL_REASONS; i++)
		mal += t.malformed[i];
	printf("%llu %llu %llu %llu %llu %llu %llu %llu\n", (unsigned long long)t.datagrams,
	       (unsigned long long)t.kernel_dropped, (unsigned long long)got, (unsigned long long)t.delivered,
	       (unsigned long long)mal, (unsigned long long)t.table_full, (unsigned long long)sent,
	       (unsigned long long)t.buffers);
	rx_close(c);
	return 0;
}
"""


@pytest.mark.parametrize("gro", [False, True])
def test_random_datagrams_under_address_and_undefined_behaviour_sanitizers(tmp_path, gro):
    (tmp_path / "fuzz.c").write_text(FUZZ_MAIN)
    exe = tmp_path / "fuzz"
    subprocess.run(["gcc", "-std=gnu11", "-O1", "-g", "-Wall", "-Wextra", "-Werror",
                    "-fsanitize=address,undefined", "-fno-sanitize-recover=all", f"-I{SOURCE_DIR}",
                    str(tmp_path / "fuzz.c"), str(SOURCE_DIR / "rxcore.c"), "-o", str(exe)], check=True)
    r = subprocess.run([str(exe)] + (["gro"] if gro else []), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    datagrams, kernel_dropped, got, delivered, malformed, table_full, sent, buffers = map(int, r.stdout.split())
    assert got == delivered > 1000 and malformed > 1000 and table_full > 0
    if gro:
        # The kernel counts dropped GRO buffers, not datagrams: the buffer is big enough for none.
        assert kernel_dropped == 0 and datagrams == sent > 20000
        assert buffers < datagrams - 10000  # The GSO runs arrived merged and were split.
    else:
        assert datagrams + kernel_dropped == sent == 20000  # Every one accounted for.
        assert buffers == datagrams
