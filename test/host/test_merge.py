#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""`ethdaq merge` against a real broker: two synthetic boards' streams published with the real
Publisher (crafted Batches, interleaved PTP timestamps), merged into time slices, the file read
back with h5py and nexusformat."""

import socket
import subprocess
import threading
import time
import uuid
import zlib

import h5py
import numpy as np
import pytest

from ethdaq.host.batch import PACKET_DTYPE, Batch, stream_name
from ethdaq.host.merge import EXIT_KAFKA, EXIT_NO_DATA
from ethdaq.host.publisher import Publisher
from ethdaq.wire.daqformat import FLAG_TS_PTP
from kafka_helpers import CLI

SAMPLES = 32                      # per datagram, 16 bits
PERIOD = 8                        # ns
T0 = 1_795_000_000_000_000_000    # PTP time, ns
SLICE = 1000                      # ns: slices cut through datagrams (256 ns each)
LATENESS = 2000                   # ns


class Stream:
    """One synthetic stream of a board: datagram seq holds samples at T0 + offset + (seq * SAMPLES + i) * PERIOD."""

    def __init__(self, ip, port, stream_id, offset):
        self.key = (int.from_bytes(socket.inet_aton(ip), "big"), port, stream_id)
        self.name = stream_name(self.key)
        self.offset = offset

    def time(self, seq):
        return T0 + self.offset + seq * SAMPLES * PERIOD

    def values(self, seq):
        return ((np.arange(seq * SAMPLES, (seq + 1) * SAMPLES) * 7 + self.key[2] * 1000 + self.offset) % 2**16) \
            .astype(np.uint16)

    def expected(self, seqs):
        """(times, values) of the datagrams `seqs`."""
        times = np.concatenate([self.time(s) + np.arange(SAMPLES) * PERIOD for s in seqs])
        return times, np.concatenate([self.values(s) for s in seqs])


def batch(items):
    """A Batch of datagrams [(stream, seq, late)] in this order, as the receive core gives them."""
    packets = np.zeros(len(items), dtype=PACKET_DTYPE)
    payload = []
    for i, (s, seq, late) in enumerate(items):
        p = packets[i]
        p["src_ip"], p["src_port"], p["stream_id"] = s.key
        p["flags"], p["sample_bits"], p["late"], p["sample_count"] = FLAG_TS_PTP, 16, late, SAMPLES
        p["seq"], p["timestamp"], p["offset"] = seq, s.time(seq), i * SAMPLES * 2
        payload.append(s.values(seq).astype(">u2").tobytes())
    return Batch(packets, np.frombuffer(b"".join(payload), dtype=np.uint8))


def _topic():
    return f"ethdaq-merge-{uuid.uuid4().hex[:8]}"


def merge(tmp_path, bootstrap, topic, *extra, name="merged.h5", timeout=120):
    r = subprocess.run(CLI + ["merge", "--kafka", bootstrap, "--topic", topic, "--slice", f"{SLICE}ns",
                              "--watermark", f"{LATENESS}ns", "-o", str(tmp_path / name), *extra],
                       capture_output=True, text=True, timeout=timeout)
    return r


def merged(path):
    """{source: (times, samples)} of the slices and of `late` (sources of samples), the slices' logs, the
    entry's attributes."""
    out = {}
    with h5py.File(path) as f:
        e = f["merged"]
        for name, g in e.items():
            if g.attrs.get("NX_class") == "NXdata" and g.attrs.get("signal") == "samples":
                log = {k: g["slices"][k][()] for k in g["slices"]}
                out[name] = (g["time"][()], g["samples"][()], log, dict(g.attrs))
        late = {name: (g["time"][()], g["samples"][()], g["message_counter"][()]) for name, g in e["late"].items()
                if g.attrs.get("signal") == "samples"}
        return out, late, {k: v for k, v in e.attrs.items()}, e["slices"]["time"][()]


def check_slices(times, samples, log):
    """Each slice record holds exactly the samples whose times fall in it, in time order."""
    assert (np.diff(log["time"]) > 0).all()                       # slices in time order
    assert log["first_sample"][0] == 0 and (np.diff(log["first_sample"]) == log["value"][:-1]).all()
    assert log["value"].sum() == len(samples) == len(times)
    for start, first, n in zip(log["time"], log["first_sample"], log["value"]):
        t = times[first:first + n]
        assert ((t >= start) & (t < start + SLICE)).all() and (np.diff(t) > 0).all()
    assert (np.diff(times) > 0).all()                             # and so the whole source in time order


def test_merge_two_boards(kafka_broker, tmp_path):
    topic = _topic()
    a0, a1 = Stream("127.0.0.2", 5001, 0, 0), Stream("127.0.0.2", 5001, 1, 40)
    b0 = Stream("127.0.0.3", 5002, 0, 100)
    streams, n = [a0, a1, b0], 60
    with Publisher(kafka_broker.bootstrap, topic=topic, run_name="merge-test") as pub:
        # Batches of both boards' datagrams, each stream's shorter than the lateness: the publisher
        # sends a Batch's datagrams stream by stream.
        for first in range(0, n, 5):
            pub.publish(batch([(s, seq, 0) for seq in range(first, first + 5) for s in streams
                               if not (s is a0 and seq == 5)]))
        pub.publish(batch([(a0, 5, 1)]))         # a0's seq 5 comes far behind the watermark: late
        pub.publish(batch([(b0, 20, 0)]))        # b0's seq 20 a second time: a duplicate
    published = pub.totals()["published"]
    assert published == 3 * n + 1

    r = merge(tmp_path, kafka_broker.bootstrap, topic, "--until-stop")
    assert r.returncode == 0, r.stderr
    sources, late, attrs, slice_starts = merged(tmp_path / "merged.h5")
    assert sorted(sources) == sorted(s.name for s in streams)
    for s in streams:
        times, samples, log, a = sources[s.name]
        check_slices(times, samples, log)
        t_late, v_late, counters = late.get(s.name, (np.zeros(0, int), np.zeros(0, np.uint16), []))
        all_t = np.concatenate([times, t_late])
        order = np.argsort(all_t)
        want_t, want_v = s.expected(range(n))
        np.testing.assert_array_equal(all_t[order], want_t)      # every sample exactly once
        np.testing.assert_array_equal(np.concatenate([samples, v_late])[order], want_v)
        assert a["period_ns"] == PERIOD and a["gaps"] == 0
        np.testing.assert_array_equal(log["time"], slice_starts)      # every source from the first slice on
        if s is not a0:
            assert (log["value"] == log["expected"]).all() and (log["completeness"] == 1).all()
    # The late datagram: kept in `late` with its counter, missing from its slices (completeness < 1).
    t_late, v_late, counters = late[a0.name]
    np.testing.assert_array_equal(t_late, a0.expected([5])[0])
    assert list(counters) == [5] * SAMPLES
    assert list(late) == [a0.name]
    times, samples, log, a = sources[a0.name]
    short = log["value"] < log["expected"]
    assert set(log["time"][short]) == {t // SLICE * SLICE for t in t_late}
    assert (log["completeness"][short] < 1).all() and (log["completeness"][~short] == 1).all()
    assert a["late_samples"] == SAMPLES and a["late_messages"] == 1
    assert sources[b0.name][3]["duplicates"] == 1
    # Counters add up: published = consumed; every sample merged, late or a duplicate.
    assert attrs["se00_messages"] == published
    assert attrs["samples"] == published * SAMPLES
    assert attrs["merged_samples"] + attrs["late_samples"] + attrs["duplicate_samples"] == attrs["samples"]
    assert (attrs["late_samples"], attrs["late_messages"], attrs["duplicates"], attrs["duplicate_samples"]) == \
        (SAMPLES, 1, 1, SAMPLES)
    assert attrs["gaps"] == 0 and attrs["held_samples"] == 0
    assert attrs["slices"] == len(slice_starts) and (np.diff(slice_starts) > 0).all()
    # The largest lag: the late datagram's first sample behind the newest time every source had
    # reached (the partition's messages come in the order published). The others' lags are within
    # the lateness, as none of their samples is late.
    lag = min(s.time(n - 1) + (SAMPLES - 1) * PERIOD for s in streams) - a0.time(5)
    assert attrs["largest_lag_ns"] == sources[a0.name][3]["largest_lag_ns"] == lag
    assert all(0 < sources[s.name][3]["largest_lag_ns"] <= LATENESS for s in (a1, b0))
    assert r.stdout.splitlines()[-1].startswith(f"merged {topic}: ")
    assert f"({published} se00), {published * SAMPLES} samples of 3 sources in {attrs['slices']} slices of " \
           f"1us; late {SAMPLES} samples (1 messages), duplicates 1 ({SAMPLES} samples), gaps 0; " \
           f"largest lag {lag / 1e3:.1f} us (--watermark 2us); wrote " in r.stdout
    with h5py.File(tmp_path / "merged.h5") as f:       # the run start and stop consumed
        run, = f["merged/runs"].values()
        assert run.attrs["run_name"] == "merge-test" and run.attrs["stop_time_ms"] >= run.attrs["start_time_ms"]
        assert f["merged/title"][()].decode() == "merge-test"
        assert f["merged/start_time"][()] and f["merged/end_time"][()]


def test_idle_source_stops_holding_slices_open(kafka_broker, tmp_path):
    """A board that stops sending: past --idle behind the newest sample of its partition it no
    longer holds the watermark, so its datagram that comes much later is late; with a longer
    --idle it still holds every slice open and the datagram is merged."""
    topic = _topic()
    a, b = Stream("127.0.0.6", 5004, 0, 0), Stream("127.0.0.7", 5004, 0, 100)
    with Publisher(kafka_broker.bootstrap, topic=topic) as pub:
        for seq in range(100):
            pub.publish(batch([(a, seq, 0)] + ([(b, seq, 0)] if seq < 10 else [])))
        pub.publish(batch([(b, 10, 0)]))
    for idle, late_samples in (("5us", SAMPLES), ("1s", 0)):
        r = merge(tmp_path, kafka_broker.bootstrap, topic, "--until-stop", "--idle", idle, name=f"idle{idle}.h5")
        assert r.returncode == 0, r.stderr
        sources, late, attrs, _ = merged(tmp_path / f"idle{idle}.h5")
        assert attrs["late_samples"] == late_samples and attrs["idle_ns"] == (5000 if idle == "5us" else 10**9)
        times, samples, log, _ = sources[b.name]
        check_slices(times, samples, log)
        if late_samples:
            np.testing.assert_array_equal(late[b.name][0], b.expected([10])[0])
            np.testing.assert_array_equal(times, b.expected(range(10))[0])
        else:
            assert not late
            np.testing.assert_array_equal(times, b.expected(range(11))[0])


def test_nexus_reader_opens_the_file(kafka_broker, tmp_path):
    from nexusformat.nexus import nxload
    topic = _topic()
    s = Stream("127.0.0.4", 5003, 2, 0)
    with Publisher(kafka_broker.bootstrap, topic=topic) as pub:
        pub.publish(batch([(s, seq, 0) for seq in range(20)]))
    r = merge(tmp_path, kafka_broker.bootstrap, topic, "--until-stop")
    assert r.returncode == 0, r.stderr
    root = nxload(str(tmp_path / "merged.h5"))
    entry = root["merged"]
    assert root.nxclass == "NXroot" and entry.nxclass == "NXentry"
    data = entry[s.name]
    assert data.nxclass == "NXdata" and data.nxsignal.nxname == "samples" and data.nxaxes[0].nxname == "time"
    np.testing.assert_array_equal(data.nxsignal.nxvalue, s.expected(range(20))[1])
    assert entry["slices"].nxclass == "NXlog" and data["slices"].nxclass == "NXlog"
    assert entry["late"].nxclass == "NXcollection" and entry.nxroot.attrs["default"] == "merged"
    # With 20 datagrams of 256 ns in 1 us slices, one source: every slice complete.
    assert (data["slices/completeness"].nxvalue == 1).all()


def test_other_producers_timestamps(kafka_broker, tmp_path):
    """se00 from the ESS library's own serialiser: timestamp location End (packet_timestamp is the
    last sample's time), per-sample timestamps, and per-sample timestamps out of order (each
    message's samples shuffled, reaching over slice bounds: they come out in time order); run start
    and stop from its pl72 and 6s4t."""
    from confluent_kafka import Producer
    from streaming_data_types import serialise_6s4t, serialise_pl72, serialise_se00
    from streaming_data_types.fbschemas.array_1d_se00.Location import Location
    topic = _topic()
    p = Producer({"bootstrap.servers": kafka_broker.bootstrap})
    p.produce(topic, serialise_pl72("job-x", "x.nxs", start_time=1_000, run_name="other"), b"run")
    for k in range(10):
        v = np.arange(k * 16, (k + 1) * 16, dtype=np.int32) - 50
        p.produce(topic, serialise_se00("end", 1, T0 + (k * 16 + 15) * PERIOD, PERIOD, k, v, Location.End), b"end")
        ts = T0 + 3 + np.arange(k * 16, (k + 1) * 16) * PERIOD
        p.produce(topic, serialise_se00("explicit", 2, int(ts[0]), 0, k, v, Location.Start, value_timestamps=ts),
                  b"explicit")
        shuffle = np.random.default_rng(k).permutation(16)
        p.produce(topic, serialise_se00("shuffled", 3, int(ts[0]), 0, k, v[shuffle], Location.Start,
                                        value_timestamps=ts[shuffle] + 2), b"shuffled")
    p.produce(topic, serialise_6s4t("job-x", stop_time=2_000), b"run")
    p.produce(topic, b"not a flatbuffer", b"junk")
    assert p.flush(30) == 0
    r = merge(tmp_path, kafka_broker.bootstrap, topic, "--until-stop")
    assert r.returncode == 0, r.stderr
    sources, late, attrs, _ = merged(tmp_path / "merged.h5")
    want_v = np.arange(160, dtype=np.int32) - 50
    for name, offset, channel in (("end", 0, 1), ("explicit", 3, 2), ("shuffled", 5, 3)):
        times, samples, log, a = sources[name]
        check_slices(times, samples, log)
        np.testing.assert_array_equal(times, T0 + offset + np.arange(160) * PERIOD)
        np.testing.assert_array_equal(samples, want_v)
        assert samples.dtype == np.int32 and a["channel"] == channel
    assert (attrs["se00_messages"], attrs["run_messages"], attrs["other_messages"]) == (30, 2, 1)
    assert attrs["consumed_messages"] == 33 and not late
    with h5py.File(tmp_path / "merged.h5") as f:
        run = f["merged/runs/job-x"].attrs
        assert (run["run_name"], run["start_time_ms"], run["stop_time_ms"]) == ("other", 1_000, 2_000)
        assert f["merged/start_time"][()].decode().startswith("1970-01-01T00:00:01")


def _partition_of(name, partitions):
    return zlib.crc32(name.encode()) % partitions    # librdkafka's "consistent" partitioner


class _Lines:
    """A process's stderr lines, read as they come."""
    def __init__(self, p):
        self.lines = []
        self.thread = threading.Thread(target=lambda: self.lines.extend(p.stderr), daemon=True)
        self.thread.start()

    def assigned(self):
        got = [line for line in self.lines if line.startswith("partitions assigned:")]
        return got[-1].split(":", 1)[1].split() if got else None


def test_consumer_group_splits_partitions(kafka_broker, tmp_path):
    """Two merges of one group on a 2-partition topic: each writes the sources of its partition."""
    from confluent_kafka.admin import AdminClient, NewTopic
    topic = _topic()
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(30)
    streams, port = [], 6000
    while len(streams) < 3:       # three streams, both partitions used
        s = Stream("127.0.0.5", port, 0, 10 * len(streams))
        port += 1
        parts = {_partition_of(x.name, 2) for x in streams}
        if not (len(streams) == 2 and parts == {_partition_of(s.name, 2)}):
            streams.append(s)
    group = f"merge-{uuid.uuid4().hex[:6]}"
    # They stop one after the other: the second takes over the first's partition (a rebalance) and
    # commits its offsets when no rebalance is going on.
    procs = [subprocess.Popen(CLI + ["merge", "--kafka", kafka_broker.bootstrap, "--topic", topic, "--group", group,
                                     "--slice", f"{SLICE}ns", "--watermark", f"{LATENESS}ns",
                                     "-o", str(tmp_path / f"part{i}.h5"), "--duration", str(20 + 10 * i)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    lines = [_Lines(p) for p in procs]
    deadline = time.monotonic() + 60
    while True:                   # both in the group, one partition each, before any data
        parts = [ln.assigned() for ln in lines]
        if all(parts) and sorted(sum(parts, [])) == [f"{topic}[0]", f"{topic}[1]"]:
            break
        assert time.monotonic() < deadline, [ln.lines for ln in lines]
        time.sleep(0.2)
    with Publisher(kafka_broker.bootstrap, topic=topic, settings={"partitioner": "consistent"}) as pub:
        for seq in range(30):     # one Batch per datagram of each stream, as a receiver reads them
            pub.publish(batch([(s, seq, 0) for s in streams]))
    for p in procs:
        p.wait(timeout=120)
        p.stdout.read()
    assert [p.returncode for p in procs] == [0, 0], [ln.lines for ln in lines]
    seen = {}
    for i in range(2):
        sources, late, attrs, _ = merged(tmp_path / f"part{i}.h5")
        part = int(parts[i][0].split("[")[1].rstrip("]"))
        assert not late and attrs["duplicates"] == 0 and attrs["group"] == group
        for name, (times, samples, log, a) in sources.items():
            assert name not in seen and a["partition"] == part == _partition_of(name, 2)
            check_slices(times, samples, log)
            seen[name] = (times, samples)
    assert sorted(seen) == sorted(s.name for s in streams)     # every source once, in one of the files
    for s in streams:
        want_t, want_v = s.expected(range(30))
        np.testing.assert_array_equal(seen[s.name][0], want_t)
        np.testing.assert_array_equal(seen[s.name][1], want_v)
    # The group's offsets were committed with the files: a third merge of the group finds nothing new.
    r = merge(tmp_path, kafka_broker.bootstrap, topic, "--group", group, "--duration", "8", name="again.h5")
    assert r.returncode == EXIT_NO_DATA and "no se00 or ev44 message was consumed" in r.stderr


@pytest.mark.parametrize("args, message", [
    (["--slice", "0"], "argument --slice: --slice must be more than 0"),
    (["--slice", "1xs"], "argument --slice: a duration like 2ms"),
    (["--watermark=-5ms"], "argument --watermark: a duration like 2ms"),
    (["--duration", "5", "--until-stop"], "argument --until-stop: not allowed with argument --duration"),
    (["--kafka-option", "nonsense"], "a Kafka option is key=value"),
])
def test_bad_arguments_are_one_line(args, message, tmp_path):
    r = subprocess.run(CLI + ["merge", "--kafka", "127.0.0.1:9", "-o", str(tmp_path / "m.h5"), *args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.startswith(f"Error: {message}"), r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "m.h5").exists()


def test_existing_output_is_refused(tmp_path):
    (tmp_path / "m.h5").write_bytes(b"keep")
    r = subprocess.run(CLI + ["merge", "--kafka", "127.0.0.1:9", "-o", str(tmp_path / "m.h5")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr == f"Error: {tmp_path / 'm.h5'} exists: choose another name or add --overwrite\n"
    assert (tmp_path / "m.h5").read_bytes() == b"keep"


def test_broker_down(tmp_path):
    from ethdaq.kafkabroker import free_port
    address = f"127.0.0.1:{free_port()}"
    r = subprocess.run(CLI + ["merge", "--kafka", address, "-o", str(tmp_path / "m.h5"), "--duration", "1"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == EXIT_KAFKA, r.stderr
    assert r.stderr.startswith(f"Error: cannot reach the Kafka brokers {address} within 10 s: ")
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "m.h5").exists()
