#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""`ethdaq merge` with events: two synthetic boards' event channels (words packed as a front-end
sends them, ethdaq.host.events.pack) and a sample stream, published by the real Publisher as ev44
and se00 into a real broker, merged, and the file read back with h5py. The expected events are
worked out here from where each event's words lie and which datagrams came, not with the host's
reassembly."""

import socket
import uuid

import h5py
import numpy as np

from ethdaq.host import events
from ethdaq.host.batch import PACKET_DTYPE, Batch, stream_name
from ethdaq.host.publisher import Publisher
from ethdaq.wire.daqformat import FLAG_TS_PTP, pack_header
from kafka_helpers import read_topic
from test_merge import Stream, batch, check_slices, merge, merged

T0 = 1_795_000_000_000_000_000    # PTP time, ns
ID_BITS = 12
WORDS = events.words_per_event(16, ID_BITS)     # 6 words an event
SAMPLES = 40                      # Words per datagram: events cross datagrams.
CHANNEL = 2
LATENESS = "20us"                 # Of the merge: one datagram of each stream is far less.


class EventBoard:
    """A board's event channel: `n` events at increasing random times with random ids, their
    words (in 16-bit samples) cut into datagrams of SAMPLES words (the last event ends the last
    datagram)."""

    def __init__(self, ip, port, seed, n, id_bits=ID_BITS):
        rng = np.random.default_rng(seed)
        self.key = (int.from_bytes(socket.inet_aton(ip), "big"), port, CHANNEL)
        self.name = stream_name(self.key)
        self.id_bits, self.per_event = id_bits, events.words_per_event(16, id_bits)
        self.times = (T0 + np.cumsum(rng.integers(50, 400, n))).tolist()
        self.ids = rng.integers(0, 2**id_bits, n).tolist()
        self.words = [w for t, i in zip(self.times, self.ids) for w in events.pack(t, i, 16, id_bits)]
        assert len(self.words) % SAMPLES == 0
        self.datagrams = len(self.words) // SAMPLES

    def stamp(self, seq):
        """The datagram's header timestamp: the time of the event its first word belongs to."""
        return self.times[seq * SAMPLES // self.per_event]

    def datagram(self, seq):
        """Datagram `seq` as the board sends it."""
        return pack_header(CHANNEL, seq, self.stamp(seq), SAMPLES, 16, FLAG_TS_PTP) + \
            np.array(self.words[seq * SAMPLES:(seq + 1) * SAMPLES], ">u2").tobytes()

    def packets(self, items):
        """[(seq, late)] -> (packet records, payload bytes) of this channel's datagrams."""
        p = np.zeros(len(items), PACKET_DTYPE)
        p["src_ip"], p["src_port"], p["stream_id"] = self.key
        p["flags"], p["sample_bits"], p["sample_count"], p["run"] = FLAG_TS_PTP, 16, SAMPLES, 1
        p["seq"] = [seq for seq, _ in items]
        p["late"] = [late for _, late in items]
        p["timestamp"] = [self.stamp(seq) for seq, _ in items]
        payload = b"".join(np.array(self.words[seq * SAMPLES:(seq + 1) * SAMPLES], ">u2").tobytes()
                           for seq, _ in items)
        return p, payload

    def whole(self, came, alone=()):
        """{seq of the datagram an event ends in: [(time, id)]} of the events whose words all came
        (datagrams `came`), and that do not cross into or out of a datagram of `alone` (one that
        came late, its events reassembled on their own)."""
        out = {}
        w = self.per_event
        for j, (t, i) in enumerate(zip(self.times, self.ids)):
            first, last = j * w // SAMPLES, (j * w + w - 1) // SAMPLES
            if first in came and last in came and not (first != last and {first, last} & set(alone)):
                out.setdefault(last, []).append((t, i))
        return out


class SampleStream(Stream):
    """test_merge's stream of samples, at a period that spans what the event channels span."""
    PERIOD = 48

    def time(self, seq):
        return T0 + self.offset + seq * 32 * self.PERIOD


def event_batch(board, items, extra=None):
    """A Batch of the board's event datagrams [(seq, late)], after the sample datagrams of
    `extra` (a test_merge batch) when given."""
    p, payload = board.packets(items)
    if extra is not None:
        p["offset"] = len(extra.payload) + np.arange(len(items)) * SAMPLES * 2
        return Batch(np.concatenate([extra.packets, p]),
                     np.concatenate([extra.payload, np.frombuffer(payload, np.uint8)]))
    p["offset"] = np.arange(len(items)) * SAMPLES * 2
    return Batch(p, np.frombuffer(payload, np.uint8))


def _events_of(path, group):
    with h5py.File(path) as f:
        g = f["merged"][group]
        return ({k: g[k][()] for k in ("event_time", "event_id", "message_id")},
                {k: g["slices"][k][()] for k in g["slices"]}, dict(g.attrs))


def test_merge_events_of_two_boards_with_samples(kafka_broker, tmp_path):
    topic = f"ethdaq-merge-ev-{uuid.uuid4().hex[:8]}"
    a, b = EventBoard("127.0.0.2", 5001, 1, 400), EventBoard("127.0.0.3", 5002, 2, 400)
    samples = SampleStream("127.0.0.2", 5001, 0, 0)
    held, lost, repeated = 5, 30, 20     # a's 5 comes late; b's 30 never; b's 20 a second time
    n = a.datagrams
    with Publisher(kafka_broker.bootstrap, topic=topic, run_name="events",
                   events={("127.0.0.2", CHANNEL): ID_BITS, ("127.0.0.3", CHANNEL): ID_BITS}) as pub:
        for seq in range(n):              # one datagram of each stream a Batch, as a receiver reads them
            if seq != held:
                pub.publish(event_batch(a, [(seq, 0)], extra=batch([(samples, seq, 0)])))
            if seq != lost:
                pub.publish(event_batch(b, [(seq, 0)]))
        pub.publish(event_batch(a, [(held, 1)], extra=batch([(samples, held, 1)])))
        pub.publish(event_batch(b, [(repeated, 1)]))
    t = pub.totals()
    assert t["published"] == 3 * n and t["unpublished"] == 0

    r = merge(tmp_path, kafka_broker.bootstrap, topic, "--until-stop", "--watermark", LATENESS)
    assert r.returncode == 0, r.stderr
    path = tmp_path / "merged.h5"
    sources, late, attrs, slice_starts = merged(path)

    # What must have come: every event whose words all came, a's late datagram's own events apart.
    in_a = a.whole(set(range(n)), alone=[held])
    in_b = b.whole(set(range(n)) - {lost})
    late_a = in_a.pop(held)
    dup_b = b.whole({repeated})[repeated]          # the repeated datagram's events on their own
    published = {a.name: sum(map(len, in_a.values())) + len(late_a),
                 b.name: sum(map(len, in_b.values())) + len(dup_b)}
    for board, want in ((a, in_a), (b, in_b)):
        ev, log, at = _events_of(path, board.name)
        got = list(zip(ev["event_time"].tolist(), ev["event_id"].tolist(), ev["message_id"].tolist()))
        assert got == sorted((t, i, seq) for seq, evs in want.items() for t, i in evs)    # in time order
        check_slices(ev["event_time"], ev["event_id"], {**log, "first_sample": log["first_event"]})
        np.testing.assert_array_equal(log["time"], slice_starts[-len(log["time"]):])
        assert at["channel"] == -1 and at["events"] == published[board.name]
        # The receiver's count of the words of no whole event, from its status: all the others.
        assert at["event_words_discarded"] == SAMPLES * n - WORDS * published[board.name]   # n datagrams each
    # a's late datagram: its own whole events in `late`, with their message_id.
    with h5py.File(path) as f:
        g = f["merged/late"][a.name]
        assert list(zip(g["event_time"][()].tolist(), g["event_id"][()].tolist())) == late_a
        assert set(g["message_id"][()].tolist()) == {held}
        assert g.attrs["signal"] == "event_id"
        top = {k: f["merged/slices"][k][()] for k in ("time", "value", "events", "sources")}
    assert list(late) == [samples.name]               # late's NXdata of samples, read by test_merge's reader
    # The sample stream beside the events: every sample once, the late datagram in `late`.
    times, values, log, _ = sources[samples.name]
    check_slices(times, values, log)
    assert len(times) + len(late[samples.name][0]) == n * 32
    # Counters: every event merged, late or a duplicate; the lost datagram a gap of b.
    total = sum(published.values())
    assert (attrs["ev44_messages"], attrs["se00_messages"]) == (2 * n, n)
    assert attrs["events"] == total and attrs["event_sources"] == 2 and attrs["sources"] == 1
    assert attrs["merged_events"] + attrs["late_events"] + attrs["duplicate_events"] == total
    assert (attrs["late_events"], attrs["late_event_messages"]) == (len(late_a), 1)
    assert (attrs["event_duplicates"], attrs["duplicate_events"]) == (1, len(dup_b))
    assert (attrs["event_gaps"], attrs["gaps"]) == (1, 0)
    assert attrs["event_words_discarded"] == 2 * n * SAMPLES - WORDS * total
    assert top["events"].sum() == attrs["merged_events"] and top["value"].sum() == attrs["merged_samples"]
    assert (top["sources"] <= 3).all() and (top["sources"] == 3).any()
    assert (f"{2 * n} ev44), " in r.stdout and
            f"; events {total} of 2 sources, late {len(late_a)} (1 messages), duplicates 1 "
            f"({len(dup_b)} events), gaps 1, words of no whole event {attrs['event_words_discarded']}; "
            in r.stdout), r.stdout
    # The messages themselves, read back with the schema's own deserialiser: the events the merge holds.
    from streaming_data_types import deserialise_ev44
    msgs = [deserialise_ev44(m.value()) for m in read_topic(kafka_broker.bootstrap, topic, _stopped)
            if m.value()[4:8] == b"ev44"]
    from_kafka = sorted(int(e.reference_time[0]) + int(tof) for e in msgs if e.source_name == b.name
                        for tof in e.time_of_flight)
    assert len(from_kafka) == published[b.name]
    ev, _, _ = _events_of(path, b.name)
    assert sorted(set(from_kafka)) == ev["event_time"].tolist()


def _stopped(got):
    return any(m.value()[4:8] == b"6s4t" for m in got)


def test_only_events_is_not_no_data(kafka_broker, tmp_path):
    """A topic of ev44 alone merges (exit status 0), its slices counting events only."""
    topic = f"ethdaq-merge-ev-{uuid.uuid4().hex[:8]}"
    a = EventBoard("127.0.0.4", 5003, 3, 60)
    with Publisher(kafka_broker.bootstrap, topic=topic, events={("127.0.0.4", CHANNEL): ID_BITS}) as pub:
        pub.publish(event_batch(a, [(seq, 0) for seq in range(a.datagrams)]))
    r = merge(tmp_path, kafka_broker.bootstrap, topic, "--until-stop", "--watermark", LATENESS)
    assert r.returncode == 0, r.stderr
    ev, log, at = _events_of(tmp_path / "merged.h5", a.name)
    assert list(zip(ev["event_time"].tolist(), ev["event_id"].tolist())) == list(zip(a.times, a.ids))
    assert log["value"].sum() == 60 and at["event_words_discarded"] == 0
    _, _, attrs, _ = merged(tmp_path / "merged.h5")
    assert attrs["se00_messages"] == 0 and attrs["merged_events"] == 60 and attrs["sources"] == 0


def test_other_producers_ev44(kafka_broker, tmp_path):
    """ev44 from the ESS library's own serialiser: several references per message (an event's time
    is the reference whose index range holds it plus its time of flight, which may be negative), a
    message without pixel ids (ids -1), and one whose indices do not fit its events (counted
    undecodable, never merged)."""
    from confluent_kafka import Producer
    from streaming_data_types import serialise_ev44
    topic = f"ethdaq-merge-ev-{uuid.uuid4().hex[:8]}"
    p = Producer({"bootstrap.servers": kafka_broker.bootstrap})
    p.produce(topic, serialise_ev44("det", 0, [T0, T0 + 5000], [0, 2], [10, -3, 7, 400], [1, 2, 3, 4]), b"det")
    p.produce(topic, serialise_ev44("det", 1, [T0 + 9000], [0], [-100, 50], []), b"det")
    p.produce(topic, serialise_ev44("det", 2, [T0 + 9500], [3], [1, 2], [5, 6]), b"det")
    assert p.flush(30) == 0
    r = merge(tmp_path, kafka_broker.bootstrap, topic, "--duration", "8")
    assert r.returncode == 0, r.stderr
    ev, _, at = _events_of(tmp_path / "merged.h5", "det")
    assert list(zip(ev["event_time"].tolist(), ev["event_id"].tolist(), ev["message_id"].tolist())) == [
        (T0 - 3 + 0, 2, 0), (T0 + 10, 1, 0), (T0 + 5007, 3, 0), (T0 + 5400, 4, 0), (T0 + 8900, -1, 1),
        (T0 + 9050, -1, 1)]
    _, _, attrs, _ = merged(tmp_path / "merged.h5")
    assert (attrs["ev44_messages"], attrs["undecodable_messages"], attrs["events"]) == (2, 1, 6)
    assert at["gaps"] == 0 and attrs["event_gaps"] == 0
