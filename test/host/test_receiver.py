"""DAQ receiver: crafted datagrams sent over loopback (127.0.0.1 only), and every kind of loss
accounted: sequence gaps, late and duplicate datagrams, board drops, malformed input and datagrams
the kernel dropped because the socket buffer was full.

Datagrams are sent before run() is called, so they are already queued and no test depends on
timing; run() is then bounded by max_datagrams (exact) with an idle_timeout as a safety net."""

import socket
import threading

import pytest

from ethdaq.host import receiver
from ethdaq.wire.daqformat import FLAG_LAST, FLAG_OVERFLOW, pack_header
from ethdaq.host.receiver import PortInUse, Receiver, format_stats, main
from ethdaq.wire import daqformat

SAFETY = 5.0  # Idle timeout that only ends a run when a test is broken.


@pytest.fixture
def rx():
    with Receiver("127.0.0.1", 0) as r:
        yield r


@pytest.fixture
def tx():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    yield s
    s.close()


def datagram(stream_id, seq, sample_count=4, sample_bits=16, flags=0, dropped=0, run=0):
    n = sample_bits // 8
    payload = b"".join(((seq + i) % 2**sample_bits).to_bytes(n, "big") for i in range(sample_count))
    return pack_header(stream_id, seq, 1000 * seq, sample_count, sample_bits, flags, dropped, run) + payload


def send(tx, rx, *datagrams):
    for d in datagrams:
        tx.sendto(d, ("127.0.0.1", rx.port))
    return len(datagrams)


def run_bounded(rx, **limits):
    """run() in a thread, so that a run that does not stop fails the test instead of hanging it."""
    result = {}
    t = threading.Thread(target=lambda: result.update(stats=rx.run(**limits)), daemon=True)
    t.start()
    t.join(30)
    assert not t.is_alive(), f"run({limits}) did not stop on its own"
    return result["stats"]


def test_two_interleaved_streams_are_counted_per_stream(rx, tx):
    sent = []
    for seq in range(10):
        sent.append(datagram(1, seq, sample_count=8, sample_bits=16))
        sent.append(datagram(2, seq, sample_count=3, sample_bits=32))
    send(tx, rx, *sent)
    got = []
    stats = rx.run(max_datagrams=20, idle_timeout=SAFETY, on_datagram=lambda h, p: got.append((h, p)))

    assert sorted(stats.streams) == [1, 2]
    s1, s2 = stats.streams[1], stats.streams[2]
    assert (s1.datagrams, s1.samples, s1.payload_bytes, s1.sample_bits) == (10, 80, 160, 16)
    assert (s2.datagrams, s2.samples, s2.payload_bytes, s2.sample_bits) == (10, 30, 120, 32)
    for s in (s1, s2):
        assert (s.first_seq, s.last_seq, s.missing, s.out_of_order, s.duplicates) == (0, 9, 0, 0, 0)
        assert (s.board_dropped, s.overflow_flags, s.runs) == (0, 0, 1)
    assert stats.datagrams == 20
    assert stats.bytes == sum(len(d) for d in sent)
    assert stats.payload_bytes == 280
    assert stats.malformed == {} and stats.kernel_dropped == 0
    # The consumer gets every datagram, in order, header parsed and payload without header.
    assert [(h.stream_id, h.seq) for h, _ in got] == [(s, q) for q in range(10) for s in (1, 2)]
    assert [p for _, p in got] == [d[daqformat.HEADER_LEN:] for d in sent]
    assert daqformat.samples(sent[3]) == [1, 2, 3]  # stream 2, seq 1


def test_gap_of_three_datagrams_counts_three_missing(rx, tx):
    n = send(tx, rx, *(datagram(7, seq) for seq in (0, 1, 5, 6)))
    s = rx.run(max_datagrams=n, idle_timeout=SAFETY).streams[7]
    assert (s.datagrams, s.missing, s.out_of_order, s.duplicates, s.last_seq) == (4, 3, 0, 0, 6)
    assert s.datagrams + s.missing == s.last_seq + 1


def test_duplicate_and_out_of_order_datagrams_are_counted_not_double_counted(rx, tx):
    n = send(tx, rx, *(datagram(3, seq) for seq in (0, 1, 3, 2, 2, 4, 0)))
    got = []
    stats = rx.run(max_datagrams=n, idle_timeout=SAFETY, on_datagram=lambda h, p: got.append(h.seq))
    s = stats.streams[3]
    assert s.out_of_order == 1     # 2 after 3: late, it filled its gap...
    assert s.missing == 0          # ...so nothing is lost.
    assert s.duplicates == 2       # The second 2 and the second 0.
    assert (s.datagrams, s.samples, s.last_seq) == (5, 20, 4)
    assert got == [0, 1, 3, 2, 4]  # Duplicates are not handed on.
    assert stats.datagrams == 7


def test_late_datagram_in_the_middle_of_a_gap_leaves_the_rest_missing(rx, tx):
    n = send(tx, rx, *(datagram(3, seq) for seq in (0, 6, 3, 3, 5)))
    s = rx.run(max_datagrams=n, idle_timeout=SAFETY).streams[3]
    assert (s.datagrams, s.missing, s.out_of_order, s.duplicates) == (4, 3, 2, 1)  # 1, 2, 4 missing.


def test_run_change_restarting_seq_at_zero_is_not_a_gap(rx, tx):
    n = send(tx, rx, *[datagram(1, seq, run=7, flags=FLAG_LAST if seq == 4 else 0) for seq in range(5)],
             *[datagram(1, seq, run=8) for seq in range(3)])
    s = rx.run(max_datagrams=n, idle_timeout=SAFETY).streams[1]
    assert (s.datagrams, s.missing, s.out_of_order, s.duplicates) == (8, 0, 0, 0)
    assert (s.runs, s.run, s.last_seq, s.last_flags) == (2, 8, 2, 1)


def test_datagrams_lost_at_the_start_of_a_later_run_are_missing(rx, tx):
    # Of the first run seen the receiver may have started late; a later run must start at 0.
    n = send(tx, rx, datagram(1, 100, run=1), datagram(1, 101, run=1), datagram(1, 2, run=2))
    s = rx.run(max_datagrams=n, idle_timeout=SAFETY).streams[1]
    assert (s.first_seq, s.missing, s.runs) == (100, 2, 2)


def test_board_dropped_samples_and_overflow_flags_are_reported(rx, tx):
    n = send(tx, rx,
             datagram(4, 0, dropped=0),
             datagram(4, 1, dropped=100, flags=FLAG_OVERFLOW),
             datagram(4, 2, dropped=100),
             datagram(4, 3, dropped=250, flags=FLAG_OVERFLOW),
             datagram(4, 1, dropped=100, flags=FLAG_OVERFLOW),  # Duplicate: counts nothing again.
             datagram(4, 0, dropped=10, flags=FLAG_OVERFLOW, run=1),  # `dropped` restarts per run.
             datagram(5, 0))
    stats = rx.run(max_datagrams=n, idle_timeout=SAFETY)
    s = stats.streams[4]
    assert (s.board_dropped, s.overflow_flags, s.duplicates) == (260, 3, 1)
    assert (stats.streams[5].board_dropped, stats.streams[5].overflow_flags) == (0, 0)


def test_malformed_datagrams_are_counted_per_reason_and_do_not_stop_the_receiver(rx, tx):
    good = datagram(9, 0)

    def patched(offset, value):
        d = bytearray(good)
        d[offset] = value
        return bytes(d)

    bad = [b"", good[:daqformat.HEADER_LEN - 1], b"\xda\x7a",   # short
           patched(0, 0x12),                                    # bad magic
           patched(2, 2),                                       # bad version
           patched(3, 44),                                      # bad header_len
           patched(34, 12),                                     # bad sample_bits
           good + b"\x00", good[:-1]]                           # wrong length
    n = send(tx, rx, good, *bad, datagram(9, 1))
    stats = rx.run(max_datagrams=n, idle_timeout=SAFETY)
    assert stats.malformed == {"short": 3, "bad magic": 1, "bad version": 1, "bad header_len": 1,
                               "bad sample_bits": 1, "wrong length": 2}
    assert stats.malformed_last["bad magic"] == "magic must be 0xDA7A, not 0x127A"
    assert stats.malformed_total == len(bad) and stats.datagrams == n
    s = stats.streams[9]
    assert (s.datagrams, s.missing, s.last_seq) == (2, 0, 1)  # The valid ones around them.
    assert list(stats.streams) == [9]


def test_port_in_use_is_a_clear_error(tx, capsys):
    tx.bind(("127.0.0.1", 0))
    port = tx.getsockname()[1]
    with pytest.raises(PortInUse, match=f"^UDP port {port} is already in use on 127.0.0.1") as e:
        Receiver("127.0.0.1", port)
    assert isinstance(e.value, RuntimeError)

    assert main(["--bind", "127.0.0.1", "--port", str(port), "--duration", "1"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [f"Error: {e.value}"]


@pytest.mark.parametrize("make, message", [
    (lambda: Receiver("127.0.0.1", 70000), "port must be an integer in 0..65535, not 70000"),
    (lambda: Receiver("localhost", 0), "bind_ip must be dotted IPv4 like 0.0.0.0, not 'localhost'"),
    (lambda: Receiver("127.0.0.1", 0, rcvbuf=0), "rcvbuf must be a positive number of bytes, not 0"),
])
def test_bad_arguments(make, message):
    with pytest.raises(ValueError, match=f"^{message}$"):
        make()


def test_bad_run_limits(rx):
    with pytest.raises(ValueError, match="^duration must be a positive number of seconds or None, not -1$"):
        rx.run(duration=-1)
    with pytest.raises(ValueError, match="^max_datagrams must be a positive integer or None, not 2.5$"):
        rx.run(max_datagrams=2.5)


def test_run_stops_after_max_datagrams_and_stats_add_up_over_runs(rx, tx):
    n = send(tx, rx, *(datagram(1, seq) for seq in range(5)))
    assert run_bounded(rx, max_datagrams=3, idle_timeout=SAFETY).datagrams == 3
    stats = run_bounded(rx, max_datagrams=2, idle_timeout=SAFETY)
    assert stats.datagrams == n and stats.streams[1].datagrams == 5 and stats.streams[1].missing == 0


def test_run_stops_after_idle_timeout_and_duration_when_nothing_arrives(rx):
    assert run_bounded(rx, idle_timeout=0.05).datagrams == 0
    assert run_bounded(rx, duration=0.05).datagrams == 0
    assert run_bounded(rx, duration=0.05, idle_timeout=SAFETY).datagrams == 0


def test_idle_timeout_ends_a_run_once_the_sender_stops(rx, tx):
    n = send(tx, rx, *(datagram(2, seq) for seq in range(10)))
    stats = run_bounded(rx, idle_timeout=0.2)
    assert stats.datagrams == n and stats.streams[2].datagrams == n


def overflow_a_tiny_buffer(tx):
    """A receiver whose buffer is the kernel minimum (a couple of datagrams) and many datagrams
    sent to it while nobody reads: most are dropped by the kernel."""
    r = Receiver("127.0.0.1", 0, rcvbuf=1)
    sent = send(tx, r, *(datagram(1, seq, sample_count=256) for seq in range(300)))
    return r, sent


def test_kernel_drops_add_up_with_what_was_received(tx):
    r, sent = overflow_a_tiny_buffer(tx)
    with r:
        stats = run_bounded(r, idle_timeout=0.5)
        received = stats.streams[1].datagrams
        assert 0 < received < sent
        assert received + stats.kernel_dropped == sent
        # The drops were the tail of the burst: the next datagram shows them as a sequence gap too.
        send(tx, r, datagram(1, sent))
        stats = run_bounded(r, max_datagrams=1, idle_timeout=SAFETY)
        assert stats.streams[1].missing == stats.kernel_dropped == sent - received
        assert f"kernel drops {sent - received}" in format_stats(stats)


def test_kernel_drops_arrive_in_band_with_so_rxq_ovfl(tx, monkeypatch):
    # Without SO_MEMINFO, the count only comes in the ancillary data of the next datagram queued.
    monkeypatch.setattr(receiver, "_meminfo_drops", lambda sock: None)
    r, sent = overflow_a_tiny_buffer(tx)
    with r:
        received = run_bounded(r, idle_timeout=0.5).datagrams
        assert 0 < received < sent
        send(tx, r, datagram(1, sent))
        stats = run_bounded(r, max_datagrams=1, idle_timeout=SAFETY)
        assert stats.kernel_dropped == sent - received


def test_receive_buffer_asks_for_32_mib_and_records_the_grant(rx):
    assert rx.rcvbuf_requested == 32 * 2**20
    assert rx.rcvbuf_granted == rx.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
    assert rx.rcvbuf_capped == (rx.rcvbuf_granted < 2 * rx.rcvbuf_requested)


def test_format_stats_has_a_row_per_stream_and_a_totals_line(rx, tx):
    n = send(tx, rx, datagram(1, 0), datagram(1, 2, dropped=7, flags=FLAG_OVERFLOW), datagram(2, 0),
             datagram(2, 0), b"junk")
    table = format_stats(rx.run(max_datagrams=n, idle_timeout=SAFETY))
    lines = table.splitlines()
    assert lines[0].split() == ["stream", "datagrams", "samples", "MiB/s", "missing", "out-of-order",
                                "duplicates", "board-dropped", "overflow"]
    rows = {line.split()[0]: line.split() for line in lines if line.split()[0] in ("1", "2", "total")}
    assert rows["1"][1:3] + rows["1"][4:] == ["2", "8", "1", "0", "0", "7", "1"]
    assert rows["2"][1:3] + rows["2"][4:] == ["1", "4", "0", "0", "1", "0", "0"]
    assert rows["total"][1:3] + rows["total"][4:] == ["3", "12", "1", "0", "1", "7", "1"]
    assert lines[-1].startswith("5 datagrams")
    assert "malformed 1 (short 1)" in lines[-1] and "kernel drops 0" in lines[-1]
    assert "lost on the board 7 samples (1 datagrams flagged OVERFLOW); lost on the network 1 datagrams" in lines[-1]


def test_command_line_prints_the_table(capsys):
    assert main(["--bind", "127.0.0.1", "--port", "0", "--duration", "0.05"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[0].split()[:3] == ["stream", "datagrams", "samples"]
    assert "kernel drops" in out
    assert err.startswith("receiving on UDP 127.0.0.1:")


def test_command_line_usage_errors_are_one_line(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--duration", "-1"])
    assert e.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "Error: argument --duration: duration must be a positive number, not '-1' "
        "(see 'python -m ethdaq.host.receiver --help')"]
