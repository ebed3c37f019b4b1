"""`ethdaq recv` end to end on loopback: a real process with the C core, crafted datagrams from
several sources, stopped by SIGTERM, Ctrl-C (SIGINT), --count and --duration; the HDF5 file and
the JSON summary must hold exactly what was counted. `ethdaq plot` on the file it wrote."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
from nexusformat.nexus import nxload

from ethdaq.host import h5file, recv
from ethdaq.host.batch import stream_name
from ethdaq.wire.daqformat import FLAG_OVERFLOW, pack_header

CLI = [sys.executable, "-m", "ethdaq.soc.cli"]


def datagram(stream_id, seq, n=8, dropped=0, flags=0):
    samples = b"".join(((seq*n + i) % 2**16).to_bytes(2, "big") for i in range(n))
    return pack_header(stream_id, seq, 1000*seq, n, 16, flags, dropped) + samples


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(tmp_path, *extra, port=None):
    port = port or free_port()
    p = subprocess.Popen(CLI + ["recv", "--bind", "127.0.0.1", "--port", str(port), "--progress", "off", *extra],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    line = p.stderr.readline()  # "receiving on UDP ...": the socket is bound.
    assert "receiving on UDP" in line, line + p.stderr.read()
    return p, port


def source(ip):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((ip, 0))
    return s


def finish(p, timeout=20):
    out, err = p.communicate(timeout=timeout)
    return p.returncode, out, err


def send_mix(port):
    """Two boards (127.0.0.2, .3), streams 0 and 1 each: board .2 stream 0 loses seq 3..4, sends
    seq 1 twice and one malformed datagram; the rest is complete. Returns {(ip, port, stream): seqs}."""
    a, b = source("127.0.0.2"), source("127.0.0.3")
    sent = {}
    for sock, ip in ((a, "127.0.0.2"), (b, "127.0.0.3")):
        for sid in (0, 1):
            seqs = [s for s in range(10) if not (ip == "127.0.0.2" and sid == 0 and s in (3, 4))]
            for seq in seqs:
                # Board .3 stream 1 reports 7 dropped samples from seq 5 on, flagged at seq 5.
                overflow = ip == "127.0.0.3" and sid == 1 and seq >= 5
                sock.sendto(datagram(sid, seq, dropped=7 if overflow else 0,
                                     flags=FLAG_OVERFLOW if overflow and seq == 5 else 0), ("127.0.0.1", port))
            sent[(ip, sock.getsockname()[1], sid)] = seqs
    a.sendto(datagram(0, 1), ("127.0.0.1", port))          # duplicate
    a.sendto(b"\xda\x7a\x01\x28 short", ("127.0.0.1", port))  # malformed
    for s in (a, b):
        s.close()
    return sent


def check_file(path, sent):
    with h5file.open_run(path) as run:
        names = {stream_name((int.from_bytes(socket.inet_aton(ip), "big"), port, sid)): seqs
                 for (ip, port, sid), seqs in sent.items()}
        assert sorted(run.streams) == sorted(names)
        for name, seqs in names.items():
            packets = run.packets(name)
            assert list(packets["seq"]) == seqs
            samples = run.samples(name)
            expect = np.concatenate([np.arange(s*8, s*8 + 8) for s in seqs]).astype(np.uint16)
            assert np.array_equal(samples, expect)
        return run.summary


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_leaves_a_file_with_every_counted_packet_and_a_summary(tmp_path, sig):
    p, port = start(tmp_path, "-o", "run.h5")
    sent = send_mix(port)
    time.sleep(0.5)
    p.send_signal(sig)
    rc, out, err = finish(p)
    assert rc == recv.EXIT_DATA_LOST, err
    summary = json.loads((tmp_path / "run.json").read_text())
    assert summary["stopped_by"] == signal.Signals(sig).name
    assert summary["packets"] == sum(len(s) for s in sent.values()) == 38
    assert summary["datagrams"] == 40
    assert (summary["missing"], summary["duplicates"], summary["malformed"]) == (2, 1, 1)
    assert summary["board_dropped"] == 7
    assert summary["malformed_by_reason"] == {"short": 1}
    assert summary["streams"]["127.0.0.2_%d_s0" % list(sent)[0][1]]["missing"] == 2
    in_file = check_file(tmp_path / "run.h5", sent)
    assert in_file == summary
    assert "lost on the board 7 samples (1 datagrams flagged OVERFLOW); lost on the network 2 datagrams; " \
           "malformed 1" in out


def test_count_larger_than_one_receive_call(tmp_path):
    """--count above what one receive call hands out (the core's max_packets) is a run that
    ends by count or idle timeout like any other, never an error."""
    from ethdaq.host.rxcore import DEFAULT_MAX_PACKETS
    p, port = start(tmp_path, "-o", "run.h5", "--count", str(DEFAULT_MAX_PACKETS + 1), "--idle-timeout", "1")
    with source("127.0.0.2") as s:
        for seq in range(12):
            s.sendto(datagram(3, seq), ("127.0.0.1", port))
    rc, out, err = finish(p)
    assert rc == 0, err
    summary = json.loads((tmp_path / "run.json").read_text())
    assert (summary["packets"], summary["stopped_by"]) == (12, "idle timeout")


def test_count_stops_after_exactly_n_datagrams(tmp_path):
    t0 = time.time_ns()
    p, port = start(tmp_path, "-o", "run.h5", "--count", "5", "--kernel-timestamps")
    with source("127.0.0.2") as s:
        for seq in range(12):
            s.sendto(datagram(3, seq), ("127.0.0.1", port))
    rc, out, err = finish(p)
    assert rc == 0, err
    with h5file.open_run(tmp_path / "run.h5") as run:
        (name,) = run.streams
        assert list(run.packets(name)["seq"]) == [0, 1, 2, 3, 4]
        assert run.summary["stopped_by"] == "count"
        rx = run.packets(name)["rx_time_ns"]
        assert np.all(rx >= t0) and np.all(rx <= time.time_ns()), "arrival times must be host clock ns"
        assert run.meta["rx_time_ns_source"] == "kernel arrival time (SO_TIMESTAMPNS)"
        assert run.meta["receiver_host"] == socket.gethostname() and run.meta["port"] == port
        assert run.summary["run_uuid"] == run.run_uuid
        assert json.loads((tmp_path / "run.json").read_text())["run_uuid"] == run.run_uuid


def test_duration_without_data_writes_an_empty_run_and_says_what_to_check(tmp_path):
    p, port = start(tmp_path, "-o", "run.h5", "--duration", "0.5")
    rc, out, err = finish(p)
    assert rc == recv.EXIT_NO_DATA == 4, err
    (hint,) = err.splitlines()
    assert hint.startswith(f"warning: no datagram arrived on UDP 127.0.0.1:{port}: is a run going to this host")
    assert f"ethdaq ctl start --ip BOARD --dst-port {port}" in hint and "ip addr" in hint and "firewall" in hint
    summary = json.loads((tmp_path / "run.json").read_text())
    assert summary["stopped_by"] == "duration" and summary["packets"] == 0
    with h5file.open_run(tmp_path / "run.h5") as run:
        assert run.streams == {}


def test_port_in_use_is_one_line_error(tmp_path):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        r = subprocess.run(CLI + ["recv", "--bind", "127.0.0.1", "--port", str(port), "--duration", "1"],
                           capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.startswith(f"Error: UDP port {port} is already in use on 127.0.0.1")
    assert len(r.stderr.strip().splitlines()) == 1


def test_existing_output_is_refused_before_anything_is_received(tmp_path):
    (tmp_path / "run.h5").write_bytes(b"precious")
    r = subprocess.run(CLI + ["recv", "--port", str(free_port()), "-o", "run.h5", "--duration", "1"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr == "Error: run.h5 exists: choose another name or add --overwrite\n"
    assert (tmp_path / "run.h5").read_bytes() == b"precious"


@pytest.mark.parametrize("args, message", [
    (["--count", "0"], "count must be a positive integer, not '0'"),
    (["--duration", "x"], "duration must be a positive number, not 'x'"),
    (["--port", "70000"], "port must be an integer in 0..65535, not '70000'"),
])
def test_bad_arguments_are_one_line_errors(tmp_path, args, message):
    r = subprocess.run(CLI + ["recv", *args], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_plot_of_a_recorded_run(tmp_path):
    p, port = start(tmp_path, "-o", "run.h5")
    send_mix(port)
    time.sleep(0.5)
    p.send_signal(signal.SIGTERM)
    assert finish(p)[0] == recv.EXIT_DATA_LOST
    r = subprocess.run(CLI + ["plot", "run.h5", "-o", "run.png"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    root = nxload(str(tmp_path / "run.h5"))  # A NeXus reader finds every stream's samples.
    with h5file.open_run(tmp_path / "run.h5") as run:
        data = {d.nxname: d for d in root.NXentry[0].NXdata}
        assert sorted(data) == sorted(run.streams)
        for name, d in data.items():
            assert d.nxsignal.nxdata.tolist() == run.samples(name).tolist()
    assert (tmp_path / "run.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    r = subprocess.run(CLI + ["plot", "missing.h5", "-o", "x.png"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.startswith("Error: ") and len(r.stderr.strip().splitlines()) == 1


# Samples the board dropped are lost data -------------------------------------------------------

def table_header(**values):
    """A DAQ header built from the field table's offsets and sizes alone (not the packer's struct)."""
    from ethdaq.wire import daqformat
    out = bytearray(daqformat.FIELDS[-1].offset + daqformat.FIELDS[-1].size)
    values = dict(magic=0xDA7A, version=1, header_len=len(out), reserved=0, **values)
    for f in daqformat.FIELDS:
        out[f.offset:f.offset + f.size] = values[f.name].to_bytes(f.size, "big")
    return bytes(out)


def test_samples_the_board_dropped_are_reported_as_lost_and_the_exit_status_says_so(tmp_path):
    """Stream 0 (the project's packer) says 100, then 250 samples dropped (cumulative) in two
    OVERFLOW datagrams; stream 1 (headers from the field table) 5 in one: 255 samples lost on the
    board, none on the network."""
    p, port = start(tmp_path, "-o", "run.h5", "--count", "15")
    with source("127.0.0.2") as s:
        for seq in range(10):
            dropped = 0 if seq < 3 else 100 if seq < 7 else 250
            s.sendto(datagram(0, seq, dropped=dropped, flags=FLAG_OVERFLOW if seq in (3, 7) else 0),
                     ("127.0.0.1", port))
        for seq in range(5):
            h = table_header(stream_id=1, flags=FLAG_OVERFLOW if seq == 2 else 0, seq=seq, timestamp=seq,
                             dropped=5 if seq >= 2 else 0, sample_count=4, sample_bits=16, run=0)
            s.sendto(h + bytes(8), ("127.0.0.1", port))
    rc, out, err = finish(p)
    assert rc == recv.EXIT_DATA_LOST == 3, err
    assert "lost on the board 255 samples (3 datagrams flagged OVERFLOW); lost on the network 0 datagrams" in out
    assert "this run lost data" in err and "exit status 3" in err
    summary = json.loads((tmp_path / "run.json").read_text())
    assert (summary["board_dropped"], summary["overflow_flags"], summary["missing"]) == (255, 3, 0)
    assert summary["data_lost"] is True


def test_a_run_without_loss_exits_0_and_says_nothing_was_lost(tmp_path):
    p, port = start(tmp_path, "--count", "4")
    with source("127.0.0.2") as s:
        for seq in range(4):
            s.sendto(table_header(stream_id=2, flags=0, seq=seq, timestamp=seq, dropped=0, sample_count=2,
                                  sample_bits=16, run=1) + bytes(4), ("127.0.0.1", port))
    rc, out, err = finish(p)
    assert rc == 0, err
    assert "lost on the board 0 samples; lost on the network 0 datagrams" in out
    assert "lost data" not in err


def test_the_live_display_counts_the_boards_drops_as_lost():
    from types import SimpleNamespace
    from rich.console import Console
    stream = dict(payload_bytes=800, datagrams=10, missing=1, out_of_order=0, duplicates=0, board_dropped=42,
                  overflow_flags=2)
    stats = SimpleNamespace(streams={(0x7F000002, 5000, 0): stream}, missing=1, malformed_total=0, duplicates=0,
                            kernel_dropped=0)
    console = Console(record=True, width=200)
    console.print(recv._live_table(stats, 1.0, [0.0, 0.0]))
    text = " ".join(console.export_text().split())   # The title wraps at the table's width.
    assert "lost on the board 42 samples (2 datagrams flagged OVERFLOW); lost on the network 1 datagrams" in text


def test_the_live_table_fits_80_columns_with_long_names_and_large_counts():
    from types import SimpleNamespace
    from rich.console import Console
    big = dict(payload_bytes=int(1192.09 * 2**20 * 12.5), datagrams=999_999_999, missing=999_999_999, out_of_order=5, duplicates=0,
               board_dropped=999_999_999, overflow_flags=99_999_999)
    key = (int.from_bytes(bytes([192, 168, 177, 150]), "big"), 65535, 7)   # 192.168.177.150_65535_s7
    stats = SimpleNamespace(streams={key: big, (0x7F000002, 5000, 0): dict(big, out_of_order=2)}, missing=2,
                            malformed_total=3, duplicates=4, kernel_dropped=0)
    console = Console(record=True, width=80)
    console.print(recv._live_table(stats, 12.5, [1.0, 2.0]))
    lines = console.export_text().splitlines()
    assert max(len(line) for line in lines) <= 80 and "…" not in "".join(lines), "\n".join(lines)
    row = next(line.split() for line in lines if line.split()[:1] == ["192.168.177.150_65535_s7"])
    assert row == ["192.168.177.150_65535_s7", "999999999", "1192.09", "999999999",
                   "999999999", "99999999"]
    assert "out-of-order 7, duplicates 4, malformed 3, kernel drops 0" in " ".join(" ".join(lines).split())


def test_board_ip_records_the_boards_replies_at_the_start_and_end_in_the_file(tmp_path):
    from board_fakes import fake_board
    board = fake_board(6, payload=1024, enable=0x3, run=42, ptp=True)
    try:
        p, port = start(tmp_path, "-o", "run.h5", "--duration", "0.5", "--board-ip", "127.0.0.1",
                        "--board-port", str(board.port))
        rc, out, err = finish(p)
    finally:
        board.close()
    assert rc == recv.EXIT_NO_DATA, err
    assert "warning: the board" not in err and "not in the file" not in err, err
    import h5py
    with h5py.File(tmp_path / "run.h5", "r") as f:
        b = f["streams/board"]
        assert sorted(b) == ["config", "identify", "ptp_at_end", "ptp_at_start", "status_at_end", "status_at_start"]
        assert b["identify"].attrs["sys_clk_hz"] == 125_000_000 and b["identify"].attrs["nchannels"] == 4
        assert b["config"].attrs["payload"] == 1024 and b["config"].attrs["enable"] == 3
        assert b["status_at_start"].attrs["run"] == 42
        assert all(b[k].attrs["NX_class"] == "NXcollection" for k in b)


def test_a_board_that_does_not_answer_costs_a_warning_not_the_run(tmp_path):
    silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    silent.bind(("127.0.0.1", 0))
    try:
        p, port = start(tmp_path, "-o", "run.h5", "--duration", "0.5", "--board-ip", "127.0.0.1",
                        "--board-port", str(silent.getsockname()[1]))
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for seq in range(3):
            s.sendto(datagram(0, seq), ("127.0.0.1", port))
        rc, out, err = finish(p)
    finally:
        silent.close()
    assert rc == 0, err
    assert "warning: the board at 127.0.0.1" in err and "did not answer" in err
    assert json.loads((tmp_path / "run.json").read_text())["packets"] == 3


def test_board_ip_without_a_file_is_a_usage_error(tmp_path):
    r = subprocess.run(CLI + ["recv", "--bind", "127.0.0.1", "--port", str(free_port()), "--board-ip", "127.0.0.1",
                              "--duration", "0.1"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "Error: --board-ip records the board's replies in the run file and names its event channels for --kafka: "
        "give the file with -o FILE.h5, or --kafka"], r.stderr
