"""Run files describe themselves (ethdaq.host.h5file): NeXus classes a NeXus reader (nexusformat)
follows to the samples, units and descriptions on every dataset (read by h5dump -A, an independent
reader), flag meanings from the wire format's table, a random run id per file beside the board's
run numbers, the board's replies when a program records them, and a file size that follows the
data (chunks sized to what a stream brought in its first second)."""

import re
import shutil
import subprocess
import uuid

import h5py
import pytest
from nexusformat.nexus import nxload

from ethdaq.host.batch import Batch
from ethdaq.host.h5file import CHUNK_BYTES, PACKETS_DTYPE, RunFileError, Writer, open_run, set_board
from ethdaq.wire import daqformat
from test_h5file import NAMES, S8, S16, S24, S32, batch, datagram, traffic

H5DUMP = shutil.which("h5dump")
needs_h5dump = pytest.mark.skipif(H5DUMP is None, reason="h5dump is not installed (Debian package "
                                                         "hdf5-tools, in the Makefile's package list)")
FOUR = (S8, S16, S24, S32)  # Four streams, as a board's four emulator channels.


def full_datagrams(keys, n, start_seq=0):
    """n datagrams of 716 samples per stream (a 1472-byte datagram's worth at 16 bits)."""
    return [datagram(k, s, 716, rx=s) for s in range(start_seq, start_seq + n) for k in keys]


def test_a_nexus_reader_finds_the_entry_each_streams_samples_as_signal_and_the_packet_log(tmp_path):
    with Writer(tmp_path / "run.h5") as w:
        w.write(batch(traffic()))
    root = nxload(str(tmp_path / "run.h5"))
    assert root.nxclass == "NXroot"
    entries = root.NXentry
    assert [e.nxname for e in entries] == ["streams"]
    data = {d.nxname: d for d in entries[0].NXdata}
    assert sorted(data) == sorted(NAMES.values())
    with open_run(tmp_path / "run.h5") as run:
        for name, d in data.items():
            assert d.nxsignal.nxname == "samples"
            assert d.nxsignal.nxdata.tolist() == run.samples(name).tolist()
            log = d["packets"]
            assert log.nxclass == "NXlog"
            packets = run.packets(name)
            assert log["time"].nxdata.tolist() == packets["timestamp"].tolist()
            assert log["time"].attrs["units"] == "ns"
            assert log["value"].nxdata.tolist() == packets["dropped"].tolist()
        # The entry's default is the first stream written: what a NeXus viewer plots first.
        assert root.plottable_data.nxname == entries[0].attrs["default"] == list(run.streams)[0]
    assert entries[0]["board"].nxclass == "NXcollection"


@needs_h5dump
def test_h5dump_shows_units_and_a_description_on_every_dataset(tmp_path):
    with Writer(tmp_path / "run.h5", compression="gzip") as w:
        w.write(batch(traffic()))
    text = subprocess.run([H5DUMP, "-A", str(tmp_path / "run.h5")], check=True, capture_output=True,
                          text=True).stdout
    # Every DATASET block (up to the next GROUP or DATASET) holds both attributes.
    blocks = re.split(r'\n\s*(?=(?:GROUP|DATASET) ")', text)
    datasets = [(re.match(r'DATASET "([^"]+)"', b).group(1), b) for b in blocks if b.startswith("DATASET")]
    fields = set(PACKETS_DTYPE.names)
    assert sorted(name for name, _ in datasets) == sorted(["samples", *fields, "time", "value"] * len(NAMES))
    # time and value are hard links to timestamp and dropped: h5dump shows each object once and
    # names it at its other link.
    links = [name for name, b in datasets if "HARDLINK" in b]
    assert len(links) == 2 * len(NAMES) and set(links) <= {"time", "timestamp", "dropped", "value"}
    shown = [(name, b) for name, b in datasets if "HARDLINK" not in b]
    for name, block in shown:
        assert 'ATTRIBUTE "units"' in block and 'ATTRIBUTE "description"' in block, name
    for cls in ("NXroot", "NXentry", "NXdata", "NXlog", "NXcollection"):
        assert f'"{cls}"' in text
    assert text.count('"NXdata"') == len(NAMES)
    assert re.search(r'ATTRIBUTE "run_uuid" \{[^}]*\}\s*DATASPACE\s+SCALAR\s*DATA \{\s*\(0\): "[0-9a-f-]{36}"', text)


def test_units_and_descriptions_say_what_each_field_is_from_the_wire_formats_table(tmp_path):
    with Writer(tmp_path / "run.h5") as w:
        w.write(batch(traffic()))
    with h5py.File(tmp_path / "run.h5", "r") as f:
        grp = f["streams"][NAMES[S24]]
        log = grp["packets"]
        flags = log["flags"].attrs["description"]
        for name, bit in daqformat.FLAGS.items():  # Every bit, its value and its meaning.
            assert f"0x{bit:04X} {name}: {daqformat.FLAG_DOCS[name]}" in flags
        wire = {fl.name: fl.doc for fl in daqformat.FIELDS}
        for field in ("seq", "run", "timestamp", "dropped", "sample_count"):
            assert log[field].attrs["description"].startswith(wire[field])
        assert "cumulative" in log["dropped"].attrs["description"]
        assert (log["timestamp"].attrs["units"], log["rx_time_ns"].attrs["units"]) == ("ns", "ns")
        assert "TAI" in log["timestamp"].attrs["description"]
        assert "UTC" in log["rx_time_ns"].attrs["description"]
        samples = grp["samples"].attrs
        assert (samples["sample_bits"], bool(samples["signed"])) == (24, False)
        assert "unsigned 24-bit" in samples["description"] and "uint32" in samples["description"]


def test_every_file_has_its_own_run_uuid_beside_the_boards_run_numbers(tmp_path):
    ids = []
    for i in range(3):
        with Writer(tmp_path / f"run{i}.h5") as w:
            # The same board run number in every file, as after a reboot.
            w.write(batch([datagram(S16, 0, 5, run=1), datagram(S16, 1, 5, run=2), datagram(S8, 0, 3, run=1)]))
        with open_run(tmp_path / f"run{i}.h5") as run:
            assert run.run_uuid == w.run_uuid == run._h5["streams"].attrs["run_uuid"]
            assert uuid.UUID(run.run_uuid).version == 4
            assert run.board_runs(NAMES[S16]) == [1, 2] and run.board_runs(S8) == [1]
            assert "run_uuid" not in run.meta
            ids.append(run.run_uuid)
    assert len(set(ids)) == 3


def test_the_boards_replies_are_recorded_when_a_program_has_them(tmp_path):
    from collections import namedtuple
    Identify = namedtuple("Identify", "board_name build clock_hz mac")
    with Writer(tmp_path / "run.h5") as w:
        w.set_board("identify", Identify("colorlight_i5", "abc1234", 60_000_000, b"\x10\xe2\xd5\x00\x00\x01"))
        w.set_board("config", {"emulator_mode": "pulse", "emulator_rate": 0.05, "channels": [0, 1]})
        w.set_board("config", {"emulator_mode": "counter"})  # Replaced, not merged.
        w.write(batch([datagram(S16, 0, 5)]))
        with pytest.raises(ValueError, match="section must be a name like 'identify', not 'a/b'"):
            w.set_board("a/b", {})
    with open_run(tmp_path / "run.h5") as run:
        assert run.board == {"identify": {"board_name": "colorlight_i5", "build": "abc1234",
                                          "clock_hz": 60_000_000, "mac": "10e2d5000001"},
                             "config": {"emulator_mode": "counter"}}
        assert list(run.streams) == [NAMES[S16]]  # The board's group is not a stream.
    with Writer(tmp_path / "none.h5") as w:
        pass
    with open_run(tmp_path / "none.h5") as run:
        assert run.board == {}  # Nobody asked the board: nothing invented.
    set_board(tmp_path / "none.h5", "status", {"link_up": True, "ptp_state": "SLAVE"})  # After the run.
    with open_run(tmp_path / "none.h5") as run:
        assert run.board == {"status": {"link_up": True, "ptp_state": "SLAVE"}}
        assert run.closed_at is not None
    (tmp_path / "text.h5").write_text("no")
    with pytest.raises(RunFileError, match=r"text.h5 is not an ethdaq run file \(not HDF5\)"):
        set_board(tmp_path / "text.h5", "status", {})


def test_a_short_run_makes_a_small_file_and_a_longer_one_grows_with_its_data(tmp_path):
    sizes = {}
    for n in (3, 400, 800):
        with Writer(tmp_path / f"run{n}.h5") as w:
            w.write(batch(full_datagrams(FOUR, n)))
        data = 716 * n * (1 + 2 + 4 + 4)  # Bytes of samples stored: 8, 16, 24 (as uint32), 32 bits.
        sizes[n] = ((tmp_path / f"run{n}.h5").stat().st_size, data)
    size3, data3 = sizes[3]
    # 4 streams of 3 datagrams: 24 kB of samples; the rest is HDF5's structure, about 35 kB a
    # stream (most of it a 2 kB chunk index per dataset), not a chunk of samples.
    assert size3 < 200_000 and size3 < data3 + 4 * 40_000
    records = 4 * 800 * PACKETS_DTYPE.itemsize
    (size400, data400), (size800, data800) = sizes[400], sizes[800]
    # Twice the data, about twice the file: what is added is the data and its records, plus at
    # most one chunk per stream not yet full.
    assert data800 - data400 < size800 - size400 < data800 - data400 + records + 4 * CHUNK_BYTES
    assert data800 < size800 < data800 + records + 4 * (CHUNK_BYTES + 40_000)
    with h5py.File(tmp_path / "run400.h5", "r") as f:   # 400 datagrams: large chunks, large writes.
        assert f["streams"][NAMES[S16]]["samples"].chunks == (400 * 716,)
        assert f["streams"][NAMES[S32]]["samples"].chunks == (CHUNK_BYTES // 4,)


def test_a_new_streams_first_second_sets_its_chunks_not_the_moment_the_timer_fired(tmp_path, monkeypatch):
    clock = [100.0]
    monkeypatch.setattr("ethdaq.host.h5file.time.monotonic", lambda: clock[0])
    w = Writer(tmp_path / "run.h5", flush_interval=1.0)
    w.write(batch(full_datagrams([S16], 1)))
    clock[0] += 0.99
    w.write(batch(full_datagrams([S32], 1)))   # S32 starts just before the timer fires.
    clock[0] += 0.01
    w.write(Batch.empty())
    assert sorted(w._h5["streams"]) == [NAMES[S16], "board"]  # S32 waits for a second of its data.
    for s in range(1, 250):
        clock[0] += 0.005
        w.write(batch(full_datagrams([S32], 1, start_seq=s)))
    assert NAMES[S32] in w._h5["streams"]
    chunk = w._h5["streams"][NAMES[S32]]["samples"].chunks[0]
    assert chunk >= 716 * 150                  # About a second of it, not one datagram's worth.
    w.close()
    with open_run(tmp_path / "run.h5") as run:
        assert run.streams[NAMES[S32]].n_packets == 250 and run.streams[NAMES[S16]].n_packets == 1
