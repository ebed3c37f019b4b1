#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""The publishing process's message cutting: its numpy path for consecutive datagrams gives
exactly the messages (bytes, keys, headers) and the per-stream state of its datagram-by-datagram
path, over random Batches with gaps between them, zero-sample datagrams and timestamps that do
not increase; and the ring carries a Batch's records and bytes unchanged."""

import numpy as np
import pytest

from ethdaq.host import pubworker
from ethdaq.host.batch import PACKET_DTYPE, Batch
from ethdaq.host.pubring import KIND_DATA, KIND_EOF, RingReader, RingWriter


class _Producer:
    """Keeps what it is handed (no broker: only the messages are compared)."""

    def __init__(self):
        self.out = []

    def produce(self, topic, value, key, headers=None, on_delivery=None):
        self.out.append((value, key, headers))


def _sender(datagrams_per_message):
    s = pubworker.Sender.__new__(pubworker.Sender)     # No Kafka client: its message cutting only.
    s.datagrams_per_message, s.sent, s._names, s._last, s._period, s._how = datagrams_per_message, {}, {}, {}, {}, {}
    s._encode, s._producer, s.topic, s._event_ids = pubworker.Encoder(), _Producer(), "t", {}
    return s


def _batches(rng, trial):
    seq0 = 0
    for k in range(4):
        n = int(rng.integers(1, 70))
        p = np.zeros(n, PACKET_DTYPE)
        p["src_ip"], p["src_port"], p["sample_bits"] = 0x7F000001, 5000, 16
        p["sample_count"] = rng.choice([0, 5, 716], n) if trial % 3 == 0 else 716
        p["seq"] = seq0 + np.arange(n)
        seq0 += n + (1 if trial % 5 == 0 and k == 1 else 0)      # a datagram missing between Batches
        p["timestamp"] = np.cumsum(rng.integers(0 if trial % 4 == 0 else 1, 9000, n)) + 10**12 * k
        p["offset"] = np.concatenate([[0], np.cumsum(p["sample_count"][:-1] * 2)])
        yield Batch(p, rng.integers(0, 256, int(p["sample_count"].sum() * 2), dtype=np.uint8))


@pytest.mark.parametrize("per_message", [1, 3, 64])
def test_consecutive_path_gives_the_same_messages(per_message, monkeypatch):
    rng = np.random.default_rng(per_message)
    for trial in range(60):
        fast, slow = _sender(per_message), _sender(per_message)
        for batch in _batches(rng, trial):
            groups = [(key, batch.select(key)) for key in batch.keys()]
            fast._publish_now(batch, groups, {})
            with monkeypatch.context() as m:
                m.setattr(pubworker, "_consecutive", lambda p: False)
                slow._publish_now(batch, groups, {})
        assert len(fast._producer.out) > 0
        assert fast._producer.out == slow._producer.out, trial
        assert (fast._period, fast._last) == (slow._period, slow._last), trial


def _record(rng, first_seq, payload_bytes):
    p = np.zeros(2, PACKET_DTYPE)
    p["seq"] = [first_seq, first_seq + 1]
    return p, rng.integers(0, 256, payload_bytes, dtype=np.uint8)


def _check(reader, want):
    kind, batch, n, end = reader.next(5.0)
    assert (kind, n) == (KIND_DATA, 2)
    np.testing.assert_array_equal(batch.packets, want[0])
    np.testing.assert_array_equal(batch.payload, want[1])
    reader.release(end, n)


def _ring(size, max_datagrams):
    ring = RingWriter(size, max_datagrams)
    reader = RingReader(ring.memory, ring.size, ring.index)
    ring.memory = ring.index = None                           # The reader owns those now.
    return ring, reader


def test_ring_refuses_more_datagrams_than_it_holds():
    rng = np.random.default_rng(1)
    ring, reader = _ring(100_000, max_datagrams=6)
    try:
        sent = [_record(rng, 2 * k, 100) for k in range(4)]
        assert [ring.put(2, *r) for r in sent] == [True, True, True, False]
        assert ring.in_flight() == 6
        _check(reader, sent[0])
        assert ring.put(2, *sent[3]) and ring.in_flight() == 6
        for r in sent[1:]:
            _check(reader, r)
        ring.close_index()
        assert reader.next(5.0)[0] == KIND_EOF
    finally:
        reader.close()
        ring.close()


def test_ring_refuses_more_bytes_than_it_holds_and_wraps():
    rng = np.random.default_rng(2)
    record = 2 * PACKET_DTYPE.itemsize + 1500
    ring, reader = _ring(int(2.5 * record), max_datagrams=1000)
    try:
        sent = [_record(rng, 2 * k, 1500) for k in range(5)]
        assert [ring.put(2, *r) for r in sent[:3]] == [True, True, False]
        _check(reader, sent[0])
        assert ring.put(2, *sent[2])                            # at the ring's start again
        _check(reader, sent[1])
        assert ring.put(2, *sent[3])
        assert not ring.put(2, *sent[4])
        for r in sent[2:4]:
            _check(reader, r)
        assert ring.put(2, *sent[4])
        _check(reader, sent[4])
    finally:
        reader.close()
        ring.close()
