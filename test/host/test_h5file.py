"""Run files (ethdaq.host.h5file): crafted Batches written and read back exactly, from several
sources and streams with 8/16/24/32/64-bit samples, late datagrams, compression on and off; the
file survives SIGKILL after a flush and SIGTERM handled by close(); errors are one line."""

import ipaddress
import json
import os
import signal
import subprocess
import sys
import textwrap

import h5py
import numpy as np
import pytest

from ethdaq.host.batch import PACKET_DTYPE, Batch, stream_key
from ethdaq.host.h5file import (PACKETS_DTYPE, RunFileError, Writer, open_run, sample_storage_dtype,
                                write_summary_json)
from ethdaq.wire.daqformat import FLAG_FIRST, FLAG_LAST, FLAG_OVERFLOW, FLAG_TS_PTP

A = int(ipaddress.IPv4Address("192.168.1.50"))
B = int(ipaddress.IPv4Address("10.0.0.2"))
S8, S16, S24, S32, S64 = (A, 5001, 0), (A, 5001, 1), (B, 6000, 0), (B, 6000, 7), (A, 5002, 0)
BITS = {S8: 8, S16: 16, S24: 24, S32: 32, S64: 64}
NAMES = {S8: "192.168.1.50_5001_s0", S16: "192.168.1.50_5001_s1", S24: "10.0.0.2_6000_s0",
         S32: "10.0.0.2_6000_s7", S64: "192.168.1.50_5002_s0"}
FIELDS = ["seq", "run", "timestamp", "flags", "sample_count", "dropped", "rx_time_ns", "late"]


def datagram(key, seq, count, bits=None, rx=0, late=0, flags=0, dropped=0, run=3):
    """One datagram as (record without offset, big-endian sample bytes); samples cover the
    whole range of the width (top bit set too) so widening or sign mistakes show."""
    bits = bits or BITS[key]
    top = 2**bits - 1
    values = [(top - 1000 * seq - 7 * i) % 2**bits if i % 2 else (seq * 1_000_003 + i) % 2**bits
              for i in range(count)]
    raw = b"".join(v.to_bytes(bits // 8, "big") for v in values)
    rec = np.zeros((), dtype=PACKET_DTYPE)
    rec["src_ip"], rec["src_port"], rec["stream_id"] = key
    rec["flags"], rec["sample_bits"], rec["late"], rec["run"] = flags, bits, late, run
    rec["sample_count"], rec["seq"], rec["timestamp"] = count, seq, 5_000_000_000 + 1000 * seq
    rec["dropped"], rec["rx_time_ns"] = dropped, 1_700_000_000_000_000_000 + rx
    return rec, raw, values


def batch(datagrams, spread=False, order=None):
    """A Batch of the datagrams in this order; spread puts junk bytes between them and lays their
    samples out in `order` (a permutation), so only `offset` says where each one is."""
    n = len(datagrams)
    packets = np.zeros(n, dtype=PACKET_DTYPE)
    payload = bytearray()
    for i in (order if order is not None else range(n)):
        rec, raw, _ = datagrams[i]
        if spread:
            payload += bytes([0xEE] * (i % 3 + 1))
        packets[i] = rec
        packets[i]["offset"] = len(payload)
        payload += raw
    return Batch(packets, np.frombuffer(bytes(payload), dtype=np.uint8).copy())


def traffic():
    """Five streams from two sources, interleaved, with late datagrams, flags and board drops."""
    out, rx = [], 0
    for seq in range(12):
        for key in (S8, S16, S24, S32, S64):
            if key == S16 and seq in (4, 5):
                continue  # Lost for now, arrive late below.
            flags = (FLAG_FIRST if seq == 0 else 0) | (FLAG_LAST if seq == 11 else 0) | FLAG_TS_PTP
            count = 3 if seq == 11 else 5 + (seq % 2)  # A short LAST datagram and two lengths.
            out.append(datagram(key, seq, count, rx=rx, flags=flags))
            rx += 10
        if seq == 8:
            out.append(datagram(S16, 5, 5, rx=rx, late=1))
            out.append(datagram(S16, 4, 6, rx=rx + 1, late=1, flags=FLAG_OVERFLOW, dropped=17))
            rx += 2
    return out


def expected(datagrams):
    """Per stream: the packet fields and samples the file must hold, in arrival order."""
    per = {}
    for rec, _, values in datagrams:
        key = stream_key(rec["src_ip"], rec["src_port"], rec["stream_id"])
        recs, samples = per.setdefault(key, ([], []))
        recs.append((rec, len(samples)))
        samples.extend(values)
    return per


def check_file(path, datagrams, compression=None):
    with open_run(path) as run:
        exp = expected(datagrams)
        assert sorted(run.streams) == sorted(NAMES[k] for k in exp)
        for key, (recs, samples) in exp.items():
            name = NAMES[key]
            info = run.streams[name]
            assert (info.name, info.key, info.src_ip, info.src_port, info.stream_id, info.sample_bits,
                    info.n_packets, info.n_samples) == (
                name, key, str(ipaddress.IPv4Address(key[0])), key[1], key[2], BITS[key], len(recs), len(samples))
            got = run.samples(name)
            assert got.dtype == sample_storage_dtype(BITS[key]) == {8: np.uint8, 16: np.uint16, 24: np.uint32,
                                                                     32: np.uint32, 64: np.uint64}[BITS[key]]
            assert got.tolist() == samples
            packets = run.packets(name)
            assert packets.dtype == PACKETS_DTYPE
            for f in FIELDS:
                assert packets[f].tolist() == [int(r[f]) for r, _ in recs], f
            assert packets["first_sample"].tolist() == [first for _, first in recs]
            assert run.packets(key).tolist() == packets.tolist()  # A key names the same group.
            grp = run._h5["streams"][name]
            attrs = {k: grp.attrs[k] for k in ("src_ip", "src_port", "stream_id", "sample_bits", "NX_class", "signal")}
            assert attrs == {"src_ip": str(ipaddress.IPv4Address(key[0])), "src_port": key[1],
                             "stream_id": key[2], "sample_bits": BITS[key], "NX_class": "NXdata", "signal": "samples"}
            assert grp.attrs["board_runs"].tolist() == sorted({int(r["run"]) for r, _ in recs})
            assert bool(grp.attrs["timestamps_ptp_at_start"]) == bool(recs[0][0]["flags"] & FLAG_TS_PTP)
            datasets = [grp["samples"]] + [grp["packets"][f] for f in PACKETS_DTYPE.names]
            for ds in datasets:
                assert ds.maxshape == (None,) and ds.chunks is not None and ds.compression == compression
                assert ds.attrs["units"] and ds.attrs["description"]


@pytest.mark.parametrize("compression", [None, "gzip", "lzf"])
def test_round_trip_of_interleaved_streams_with_late_datagrams(tmp_path, compression):
    d = traffic()
    meta = {"bind": "0.0.0.0", "port": 5000, "command": ["ethdaq", "recv", "-o", "run.h5"]}
    with Writer(tmp_path / "run.h5", compression=compression, meta=meta) as w:
        w.write(batch(d[:20], spread=True, order=list(reversed(range(20)))))
        w.write(batch(d[20:]))
        w.close(summary={"packets": len(d), "late": 2, "per_stream": {NAMES[S16]: {"missing": 0}}})
    check_file(tmp_path / "run.h5", d, compression)
    with open_run(tmp_path / "run.h5") as run:
        assert run.summary == {"packets": len(d), "late": 2, "per_stream": {NAMES[S16]: {"missing": 0}}}
        assert run.meta == {"bind": "0.0.0.0", "port": 5000, "command": '["ethdaq", "recv", "-o", "run.h5"]'}
        assert type(run.meta["port"]) is int
        assert run._h5.attrs["format"] == "ethdaq-run" and run._h5.attrs["format_version"] == 2
        assert run.created.endswith("+00:00") and run.closed_at >= run.created


def test_many_small_writes_equal_one_big_write(tmp_path):
    d = traffic()
    with Writer(tmp_path / "big.h5") as w:
        w.write(batch(d))
    # A tiny buffer: nearly every write flushes, so appends land at many offsets.
    with Writer(tmp_path / "small.h5", buffer_bytes=40) as w:
        for i in range(0, len(d), 3):
            w.write(batch(d[i:i + 3]))
            w.write(Batch.empty())
    check_file(tmp_path / "small.h5", d)
    with open_run(tmp_path / "big.h5") as big, open_run(tmp_path / "small.h5") as small:
        assert big.streams == small.streams
        for name in big.streams:
            assert big.packets(name).tobytes() == small.packets(name).tobytes()
            assert big.samples(name).tobytes() == small.samples(name).tobytes()


@pytest.mark.parametrize("per_batch", [1, 7, 4096])
def test_iter_batches_gives_back_the_datagrams_as_received(tmp_path, per_batch):
    d = traffic()
    with Writer(tmp_path / "run.h5", compression="lzf") as w:
        w.write(batch(d, spread=True, order=list(np.random.default_rng(1).permutation(len(d)))))
    with open_run(tmp_path / "run.h5") as run:
        batches = list(run.iter_batches(packets_per_batch=per_batch))
    assert all(isinstance(b, Batch) for b in batches)
    assert [len(b) for b in batches] == [per_batch] * (len(d) // per_batch) + ([len(d) % per_batch] if len(d) % per_batch else [])
    got = np.concatenate([b.packets for b in batches])
    # rx_time_ns grows in arrival order, so the merge gives back exactly the arrival order.
    want = np.array([rec for rec, _, _ in d])
    for f in PACKET_DTYPE.names:
        if f != "offset":
            assert got[f].tolist() == want[f].tolist(), f
    i = 0
    for b in batches:
        assert b.payload.dtype == np.uint8
        ends = b.packets["offset"] + b.packets["sample_count"] * (b.packets["sample_bits"] // 8)
        assert b.packets["offset"][0] == 0 and b.packets["offset"][1:].tolist() == ends[:-1].tolist()
        assert ends[-1] == b.payload.size  # Back to back, like the live receiver's.
        for j in range(len(b)):
            assert b.raw(j).tobytes() == d[i][1]  # The very bytes of the wire.
            assert b.samples(j).tolist() == d[i][2]
            i += 1


@pytest.mark.parametrize("per_batch", [2, 10])
def test_iter_batches_keeps_each_streams_order_when_its_clock_steps_back(tmp_path, per_batch):
    # S8's host clock steps back by 1 ms after its second datagram; S16 arrives in between.
    d = [datagram(S8, 0, 2, rx=1000), datagram(S8, 1, 2, rx=2000), datagram(S8, 2, 2, rx=500),
         datagram(S16, 0, 2, rx=1500), datagram(S16, 1, 2, rx=2500)]
    with Writer(tmp_path / "run.h5") as w:
        w.write(batch(d))
    with open_run(tmp_path / "run.h5") as run:
        got = np.concatenate([b.packets for b in run.iter_batches(per_batch)])
    assert [(int(p["stream_id"]), int(p["seq"])) for p in got] == [(0, 0), (1, 0), (0, 1), (0, 2), (1, 1)]


def test_iter_batches_keeps_each_streams_order_when_many_datagrams_share_a_time(tmp_path):
    # A receiver may stamp a whole burst with one time: order between streams is then unknown,
    # but each stream must come back in its own order.
    d = [datagram(key, seq, 1, rx=seq // 50) for seq in range(300) for key in (S8, S16, S32)]
    with Writer(tmp_path / "run.h5") as w:
        w.write(batch(d))
    with open_run(tmp_path / "run.h5") as run:
        got = np.concatenate([b.packets for b in run.iter_batches(64)])
    for key in (S8, S16, S32):
        mine = got[(got["src_ip"] == key[0]) & (got["src_port"] == key[1]) & (got["stream_id"] == key[2])]
        assert mine["seq"].tolist() == list(range(300))


def test_a_stream_whose_sample_width_changes_gets_a_second_group(tmp_path):
    d = [datagram(S16, 0, 4, bits=16, rx=0), datagram(S16, 1, 4, bits=24, run=4, rx=1),
         datagram(S16, 2, 2, bits=24, run=4, rx=2), datagram(S16, 3, 3, bits=16, run=5, rx=3)]
    with Writer(tmp_path / "run.h5") as w:
        w.write(batch(d[:2]))
        w.write(batch(d[2:]))
        assert w.streams == {NAMES[S16]: (2, 7), NAMES[S16] + "_24bit": (2, 6)}
    with open_run(tmp_path / "run.h5") as run:
        assert list(run.streams) == [NAMES[S16], NAMES[S16] + "_24bit"]
        wide = run.streams[NAMES[S16] + "_24bit"]
        assert (wide.key, wide.sample_bits, wide.n_packets) == (S16, 24, 2)
        assert run.samples(NAMES[S16]).tolist() == d[0][2] + d[3][2]
        assert run.samples(NAMES[S16] + "_24bit").tolist() == d[1][2] + d[2][2]
        assert run.samples(S16).dtype == np.uint16  # The key names the first width's group.
        assert run.packets(NAMES[S16] + "_24bit")["run"].tolist() == [4, 4]
        got = [(int(p["seq"]), int(p["sample_bits"])) for b in run.iter_batches() for p in b.packets]
    assert got == [(0, 16), (1, 24), (2, 24), (3, 16)]


def test_samples_outside_the_payload_are_refused_before_anything_is_buffered(tmp_path):
    good = batch([datagram(S16, 0, 4)])
    bad = batch([datagram(S16, 1, 4), datagram(S8, 0, 4)])
    bad.packets["offset"][1] = bad.payload.size - 2
    with Writer(tmp_path / "run.h5") as w:
        w.write(good)
        with pytest.raises(ValueError, match=r"datagram samples must lie inside the payload \(12 bytes\), not end at byte 14"):
            w.write(bad)
        with pytest.raises(TypeError, match="batch.packets must have dtype"):
            w.write(Batch(np.zeros(1, dtype=[("seq", "u8")]), np.zeros(0, np.uint8)))
        bad.packets["sample_bits"][1] = 12
        with pytest.raises(ValueError, match=r"sample_bits must be a multiple of 8 in 8..64, not 12"):
            w.write(bad)
    with open_run(tmp_path / "run.h5") as run:
        assert list(run.streams) == [NAMES[S16]]
        assert run.samples(S16).tolist() == datagram(S16, 0, 4)[2]


def test_flush_happens_after_the_interval_and_when_the_buffer_is_full(tmp_path, monkeypatch):
    clock = [100.0]
    monkeypatch.setattr("ethdaq.host.h5file.time.monotonic", lambda: clock[0])
    w = Writer(tmp_path / "run.h5", buffer_bytes=10_000, flush_interval=1.0)

    def in_file():
        grp = w._h5["streams"].get(NAMES[S32])
        return 0 if grp is None else grp["packets"]["seq"].shape[0]
    w.write(batch([datagram(S32, 0, 5)]))
    clock[0] += 0.9
    w.write(Batch.empty())
    assert in_file() == 0
    clock[0] += 0.1
    w.write(Batch.empty())  # An empty batch only checks the timer.
    assert in_file() == 1
    w.write(batch([datagram(S32, 1, 2000)]))  # 8000 bytes of samples: below 10_000.
    assert in_file() == 1
    w.write(batch([datagram(S32, 2, 500)]))
    assert in_file() == 3
    w.close()


class _InterruptOnce:
    """A dataset whose first write raises KeyboardInterrupt, as a signal handler would."""
    def __init__(self, ds):
        self.ds, self.armed = ds, True

    def __getattr__(self, name):
        return getattr(self.ds, name)

    def __setitem__(self, index, value):
        if self.armed:
            self.armed = False
            raise KeyboardInterrupt
        self.ds[index] = value


def test_close_after_an_interrupted_flush_writes_everything_once(tmp_path):
    d = traffic()
    # A timer that never fires: the second write must stay in the buffer however slow the machine.
    w = Writer(tmp_path / "run.h5", flush_interval=1e9)
    w.write(batch(d[:10]))
    w.flush()
    w.write(batch(d[10:]))
    assert w._pending_bytes > 0
    g = w._groups[NAMES[S16]]
    samples, packets = g.datasets
    # Samples and the first fields written, the timestamps and the rest not yet.
    g.datasets = (samples, dict(packets, timestamp=_InterruptOnce(packets["timestamp"])))
    with pytest.raises(KeyboardInterrupt):
        w.flush()
    w.close(summary={"ok": True})  # As the command's `finally` does.
    w.close()
    check_file(tmp_path / "run.h5", d)


def test_close_twice_write_after_close_and_an_unserialisable_summary(tmp_path):
    d = traffic()
    w = Writer(tmp_path / "run.h5")
    w.write(batch(d))
    with pytest.raises(TypeError, match="summary values must be JSON-serialisable, not object"):
        w.close(summary={"bad": object()})
    assert w.closed
    w.close(summary={"late": 1})  # Closed already: nothing happens.
    with pytest.raises(ValueError, match="the writer is closed"):
        w.write(batch(d))
    check_file(tmp_path / "run.h5", d)  # The data was kept though the summary was not.
    with open_run(tmp_path / "run.h5") as run:
        assert run.summary is None and run.closed_at is not None


def test_numpy_values_in_the_summary_become_json(tmp_path):
    with Writer(tmp_path / "run.h5") as w:
        w.close(summary={"n": np.uint64(2**63), "rate": np.float32(0.5), "hist": np.arange(3), "keys": ("a", 1)})
    with open_run(tmp_path / "run.h5") as run:
        assert run.summary == {"n": 2**63, "rate": 0.5, "hist": [0, 1, 2], "keys": ["a", 1]}
        assert run.streams == {}


def test_summary_json_is_written_beside_the_file_atomically(tmp_path):
    out = write_summary_json(tmp_path / "run.h5", {"packets": 5, "streams": {"a": [1, 2]}})
    assert out == tmp_path / "run.json"
    assert json.loads(out.read_text()) == {"packets": 5, "streams": {"a": [1, 2]}}
    assert out.read_text().endswith("}\n")
    write_summary_json(tmp_path / "run.h5", {"packets": 6})
    assert json.loads(out.read_text()) == {"packets": 6}
    with pytest.raises(TypeError):
        write_summary_json(tmp_path / "run.h5", {"packets": object()})
    assert json.loads(out.read_text()) == {"packets": 6}  # The old summary is still whole.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]  # No temporary left behind.


def test_file_uses_the_hdf5_1_8_format_so_a_crash_leaves_it_readable(tmp_path):
    with Writer(tmp_path / "run.h5") as w:
        w.write(batch(traffic()))
    with h5py.File(tmp_path / "run.h5", "r") as f:
        # Superblock v3 (the 1.10 format) would mark the file open for writing until closed.
        assert f.id.get_create_plist().get_version()[0] == 2


CHILD = textwrap.dedent("""
    import signal, sys, time
    sys.path.insert(0, {testdir!r})
    from test_h5file import batch, datagram, S16, S24
    from ethdaq.host.batch import Batch
    from ethdaq.host.h5file import Writer
    mode, path = sys.argv[1], sys.argv[2]
    w = Writer(path, buffer_bytes=2**30, flush_interval=3600)
    if mode == "kill":
        w.write(batch([datagram(S16, s, 5, rx=s) for s in range(30)] + [datagram(S24, 0, 7, rx=99)]))
        w.flush()
        w.write(batch([datagram(S16, s, 5, rx=s) for s in range(30, 40)]))  # Buffered only.
        print("flushed", flush=True)
        time.sleep(60)
    else:
        def stop(signum, frame):  # What the CLI does: SIGTERM ends the loop like Ctrl-C.
            raise KeyboardInterrupt
        signal.signal(signal.SIGTERM, stop)
        n = 0
        try:
            while True:
                w.write(batch([datagram(S16, n, 5, rx=n)]))
                n += 1
                if n == 50:
                    print("writing", flush=True)
                time.sleep(0.001)
        except KeyboardInterrupt:
            pass
        finally:
            w.close(summary={{"packets": n, "stopped_by": "SIGTERM"}})
        print(n, flush=True)
""")


def run_child(tmp_path, mode, sig):
    script = CHILD.format(testdir=os.path.dirname(__file__))
    p = subprocess.Popen([sys.executable, "-c", script, mode, str(tmp_path / "run.h5")],
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() in ("flushed", "writing")
        with pytest.raises(RunFileError) as e:
            open_run(tmp_path / "run.h5")
        assert str(e.value) == (f"cannot open {tmp_path}/run.h5: another process has it open for writing "
                                "(HDF5 file lock); read it once the writer has closed it")
        p.send_signal(sig)
        out = p.stdout.read()
        p.wait(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return p.returncode, out


def test_sigkill_after_a_flush_leaves_a_file_with_exactly_what_was_flushed(tmp_path):
    rc, _ = run_child(tmp_path, "kill", signal.SIGKILL)
    assert rc == -signal.SIGKILL
    flushed = [datagram(S16, s, 5, rx=s) for s in range(30)] + [datagram(S24, 0, 7, rx=99)]
    check_file(tmp_path / "run.h5", flushed)
    with open_run(tmp_path / "run.h5") as run:
        assert run.summary is None and run.closed_at is None  # Not closed cleanly, and it says so.


def test_sigterm_handled_by_close_keeps_every_datagram_and_the_summary(tmp_path):
    rc, out = run_child(tmp_path, "term", signal.SIGTERM)
    assert rc == 0
    n = int(out.split()[-1])
    assert n >= 50
    check_file(tmp_path / "run.h5", [datagram(S16, s, 5, rx=s) for s in range(n)])
    with open_run(tmp_path / "run.h5") as run:
        assert run.summary == {"packets": n, "stopped_by": "SIGTERM"}


def test_unreadable_files_are_one_line_errors(tmp_path):
    (tmp_path / "text.h5").write_text("hello\n")
    (tmp_path / "adir").mkdir()
    with h5py.File(tmp_path / "plain.h5", "w"):
        pass
    with h5py.File(tmp_path / "other.h5", "w") as f:
        f.attrs["format"] = "something-else"
    with h5py.File(tmp_path / "future.h5", "w") as f:
        f.attrs["format"], f.attrs["format_version"] = "ethdaq-run", 3
    with h5py.File(tmp_path / "nostreams.h5", "w") as f:
        f.attrs["format"], f.attrs["format_version"] = "ethdaq-run", 2
    cases = {
        "missing.h5": "cannot open {d}/missing.h5: No such file or directory",
        "adir": "cannot open {d}/adir: Is a directory",
        "text.h5": "{d}/text.h5 is not an ethdaq run file (not HDF5)",
        "plain.h5": "{d}/plain.h5 is not an ethdaq run file (no format attribute)",
        "other.h5": "{d}/other.h5 is not an ethdaq run file (format is 'something-else', not 'ethdaq-run')",
        "future.h5": "{d}/future.h5 has format_version 3; this ethdaq reads versions 1, 2",
        "nostreams.h5": "{d}/nostreams.h5 is not an ethdaq run file (no /streams group)",
    }
    for name, message in cases.items():
        with pytest.raises(RunFileError) as e:
            open_run(tmp_path / name)
        assert str(e.value) == message.format(d=tmp_path)


def test_writer_errors(tmp_path):
    (tmp_path / "run.h5").write_text("a previous run")
    with pytest.raises(RunFileError, match=r"run.h5 exists: choose another name or overwrite it explicitly"):
        Writer(tmp_path / "run.h5")
    with Writer(tmp_path / "run.h5", overwrite=True):
        pass
    with pytest.raises(RunFileError, match=r"^cannot create .*/nodir/run.h5: "):
        Writer(tmp_path / "nodir" / "run.h5")
    with pytest.raises(ValueError, match=r"compression must be one of \(None, 'gzip', 'lzf'\), not 'zstd'"):
        Writer(tmp_path / "x.h5", compression="zstd")
    with pytest.raises(ValueError, match=r"meta keys must be strings other than format, .*, not 'summary'"):
        Writer(tmp_path / "x.h5", meta={"summary": "x"})
    assert not (tmp_path / "x.h5").exists()
    with Writer(tmp_path / "run.h5", overwrite=True) as w:
        w.write(batch([datagram(S8, 0, 3)]))
    with open_run(tmp_path / "run.h5") as run:
        with pytest.raises(KeyError, match=r"stream must be one of 192.168.1.50_5001_s0, not 'nope'"):
            run.samples("nope")
        with pytest.raises(ValueError, match="packets_per_batch must be a positive integer, not 0"):
            next(run.iter_batches(0))


def test_a_format_version_1_file_is_still_read(tmp_path):
    """Version 1: packets as one record dataset per stream, no NeXus classes, no run_uuid."""
    d = traffic()
    with h5py.File(tmp_path / "v1.h5", "w") as f:
        f.attrs["format"], f.attrs["format_version"], f.attrs["created"] = "ethdaq-run", 1, "2026-01-01T00:00:00+00:00"
        f.attrs["port"] = 5000
        for key, (recs, samples) in expected(d).items():
            grp = f.create_group(f"streams/{NAMES[key]}")
            grp.attrs["src_ip"], grp.attrs["src_port"] = str(ipaddress.IPv4Address(key[0])), key[1]
            grp.attrs["stream_id"], grp.attrs["sample_bits"] = key[2], BITS[key]
            grp["samples"] = np.array(samples, dtype=sample_storage_dtype(BITS[key]))
            packets = np.zeros(len(recs), dtype=PACKETS_DTYPE)
            for i, (rec, first) in enumerate(recs):
                for field in FIELDS:
                    packets[i][field] = rec[field]
                packets[i]["first_sample"] = first
            grp["packets"] = packets
    with open_run(tmp_path / "v1.h5") as run:
        assert (run.run_uuid, run.board, run.meta) == (None, {}, {"port": 5000})
        for key, (recs, samples) in expected(d).items():
            assert run.samples(key).tolist() == samples
            assert run.packets(key, 1, 3)["seq"].tolist() == [int(r["seq"]) for r, _ in recs[1:3]]
        assert sum(len(b) for b in run.iter_batches(7)) == len(d)
