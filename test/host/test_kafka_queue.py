#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""The publisher's bounded queue against the real test broker: a Batch that does not fit is
counted unpublished whole and never reaches the topic; what does fit reaches it in order, per
stream; received = published + unpublished exactly, however many were dropped."""

import uuid

import numpy as np

from ethdaq.host.batch import PACKET_DTYPE, Batch, decode_samples, stream_name
from ethdaq.host.publisher import Publisher
from ethdaq.host.se00 import Encoder
from kafka_helpers import PERIOD_NS, SAMPLES, T0, decode, read_topic, samples, seen

SRC_IP, SRC_PORT = 0x7F000002, 5001          # 127.0.0.2:5001
STREAMS = (0, 1)


def batch(first_seq, per_stream):
    """A Batch as the receive core hands them out: `per_stream` consecutive datagrams of each
    stream from `first_seq`, streams interleaved, 16-bit big-endian samples."""
    n = per_stream * len(STREAMS)
    p = np.zeros(n, PACKET_DTYPE)
    p["src_ip"], p["src_port"], p["sample_bits"], p["sample_count"] = SRC_IP, SRC_PORT, 16, SAMPLES
    p["stream_id"] = np.tile(STREAMS, per_stream)
    p["seq"] = first_seq + np.repeat(np.arange(per_stream), len(STREAMS))
    p["timestamp"] = T0 + p["seq"] * SAMPLES * PERIOD_NS
    p["offset"] = np.arange(n) * SAMPLES * 2
    payload = np.concatenate([samples(int(sid), int(seq)).astype(">u2").view(np.uint8)
                              for sid, seq in zip(p["stream_id"], p["seq"])])
    return Batch(p, payload)


def _topic():
    return f"ethdaq-queue-{uuid.uuid4().hex[:8]}"


def _se00(bootstrap, topic):
    got = read_topic(bootstrap, topic, seen(b"6s4t", 1))
    return [(m, d) for _, m, d in decode(got)[b"se00"]]


def test_a_batch_larger_than_the_queue_is_unpublished_whole(kafka_broker):
    topic = _topic()
    with Publisher(kafka_broker.bootstrap, topic=topic, queue_datagrams=8) as pub:
        pub.publish(batch(0, 2))            # 4 datagrams: fit
        pub.publish(batch(2, 5))            # 10: more than the whole queue holds
        pub.publish(batch(7, 1))            # 2: fit
    t = pub.totals()
    assert (t["received"], t["published"], t["queue_full"], t["unpublished"], t["pending"]) == (16, 6, 10, 10, 0)
    for sid in STREAMS:
        c = pub.counters[(SRC_IP, SRC_PORT, sid)]
        assert (c.received, c.published, c.queue_full) == (8, 3, 5)
    msgs = _se00(kafka_broker.bootstrap, topic)
    for sid in STREAMS:
        mine = [m for m, _ in msgs if m.channel == sid]
        assert [m.message_counter for m in mine] == [0, 1, 7]
        for m in mine:
            np.testing.assert_array_equal(m.values, samples(sid, m.message_counter))


def test_queue_full_drops_are_counted_and_the_rest_stays_in_order(kafka_broker):
    """Batches handed over far faster than the thread publishes them, into a queue of 4 Batches:
    many are dropped. Every Batch reaches the topic whole or not at all, each stream's messages
    are in order, and the counters say exactly how many of each."""
    topic = _topic()
    per_stream, n_batches = 8, 400
    with Publisher(kafka_broker.bootstrap, topic=topic, queue_datagrams=4 * per_stream * len(STREAMS)) as pub:
        for k in range(n_batches):
            pub.publish(batch(k * per_stream, per_stream))
    t = pub.totals()
    assert t["received"] == n_batches * per_stream * len(STREAMS)
    assert t["received"] == t["published"] + t["unpublished"] and t["pending"] == 0
    assert t["queue_full"] > 0 and t["queue_full"] == t["unpublished"]
    msgs = _se00(kafka_broker.bootstrap, topic)
    assert sum(d for _, d in msgs) == t["published"]
    for sid in STREAMS:
        c = pub.counters[(SRC_IP, SRC_PORT, sid)]
        seqs = [m.message_counter for m, _ in msgs if m.channel == sid]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs) == c.published
        present = {s // per_stream for s in seqs}                   # whole Batches or nothing
        assert sorted(seqs) == [s for b in sorted(present) for s in range(b * per_stream, (b + 1) * per_stream)]
        assert c.queue_full == (n_batches - len(present)) * per_stream
        assert {m.name for m, _ in msgs if m.channel == sid} == {stream_name((SRC_IP, SRC_PORT, sid))}


def test_mixed_sample_sizes_in_one_batch(kafka_broker):
    """A Batch with a 16-bit and a 24-bit stream (no one size for the whole payload): each
    message's samples are its own datagram's, 24 bits widened to uint32."""
    topic = _topic()
    rng = np.random.default_rng(1)
    n, widths = 6, {0: 16, 1: 24}
    p = np.zeros(2 * n, PACKET_DTYPE)
    p["src_ip"], p["src_port"], p["sample_count"] = SRC_IP, SRC_PORT, SAMPLES
    p["stream_id"] = np.tile([0, 1], n)
    p["seq"] = np.repeat(np.arange(n), 2)
    p["sample_bits"] = [widths[int(s)] for s in p["stream_id"]]
    p["timestamp"] = T0 + p["seq"] * SAMPLES * PERIOD_NS
    sizes = p["sample_bits"].astype(int) // 8 * SAMPLES
    p["offset"] = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    payload = rng.integers(0, 256, int(sizes.sum()), dtype=np.uint8)
    with Publisher(kafka_broker.bootstrap, topic=topic, datagrams_per_message=4) as pub:
        pub.publish(Batch(p, payload))
    assert pub.totals()["published"] == 2 * n
    msgs = _se00(kafka_broker.bootstrap, topic)
    for sid, bits in widths.items():
        mine = [m for m, _ in msgs if m.channel == sid]
        idx = np.flatnonzero(p["stream_id"] == sid)
        want = np.concatenate([decode_samples(payload[int(p["offset"][i]):int(p["offset"][i] + sizes[i])], bits)
                               for i in idx])
        assert [m.message_counter for m in mine] == [0, 4]
        got = np.concatenate([m.values for m in mine])
        assert got.dtype == want.dtype == (np.uint16 if bits == 16 else np.uint32)
        np.testing.assert_array_equal(got, want)


class FailingEncoder(Encoder):
    """The se00 encoder, raising on stream 1's message of seq 2 (imported by name in the
    publishing process)."""

    def __call__(self, name, channel, timestamp, period, seq, values):
        if channel == 1 and seq == 2:
            raise RuntimeError("encoder broke")
        return super().__call__(name, channel, timestamp, period, seq, values)


def test_a_batch_the_process_fails_on_is_counted_unpublished_and_publishing_goes_on(kafka_broker):
    """An error inside the publishing process (here: encoding stream 1's third message raises)
    is reported, the datagrams of that Batch not yet handed to librdkafka are counted unpublished
    (failed), received = published + unpublished still holds through the process boundary, and
    the next Batch is published."""
    topic = _topic()
    with Publisher(kafka_broker.bootstrap, topic=topic, encoder=FailingEncoder) as pub:
        pub.publish(batch(0, 4))
        pub.publish(batch(4, 2))
    t = pub.totals()
    assert t["received"] == 12 and t["received"] == t["published"] + t["unpublished"] and t["pending"] == 0
    one = pub.counters[(SRC_IP, SRC_PORT, 1)]
    zero = pub.counters[(SRC_IP, SRC_PORT, 0)]
    assert (one.published, one.failed) == (4, 2) and (zero.published, zero.failed) == (6, 0)
    assert pub.errors.count >= 1, "the process's error is counted with the client's"
    msgs = _se00(kafka_broker.bootstrap, topic)
    assert [m.message_counter for m, _ in msgs if m.channel == 1] == [0, 1, 4, 5]
