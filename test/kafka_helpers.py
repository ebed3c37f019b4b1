#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Kafka tests' tools: reading a topic back from the test broker (every partition from its beginning,
no consumer group), loopback boards sending DAQ datagrams, and the checks of what came back."""

import contextlib
import json
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from ethdaq.host.batch import stream_name
from ethdaq.kafkabroker import BrokerError, KafkaBroker
from ethdaq.wire.daqformat import FLAG_TS_PTP, pack_header


@contextlib.contextmanager
def running_broker():
    """A broker of its own, started, closed at the end; the test fails in one line when none
    starts."""
    try:
        broker = KafkaBroker().start()
    except BrokerError as e:
        broker, error = None, str(e)
    if broker is None:
        pytest.fail(f"no Kafka broker: {error}", pytrace=False)
    try:
        yield broker
    finally:
        broker.close()


def read_topic(bootstrap, topic, until, timeout=60.0):
    """Messages of `topic` (every partition, from the start) until `until(messages)` is true;
    AssertionError after `timeout` seconds with what came."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "ethdaq-tests", "enable.auto.commit": False,
                  "enable.partition.eof": False})
    got = []
    try:
        deadline = time.monotonic() + timeout
        parts = None
        while parts is None:
            md = c.list_topics(topic, timeout=10).topics[topic]
            if md.error is None and md.partitions:
                parts = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(md.partitions)]
            else:
                assert time.monotonic() < deadline, f"topic {topic} does not exist: {md.error}"
                time.sleep(0.2)
        c.assign(parts)
        while not until(got):
            assert time.monotonic() < deadline, f"only {len(got)} messages came back from {topic}"
            m = c.poll(1.0)
            if m is None:
                continue
            if m.error() is not None:
                assert m.error().retriable() or m.error().code() == KafkaError._PARTITION_EOF, m.error()
                continue
            got.append(m)
    finally:
        c.close()
    return got


def seen(schema, n):
    """read_topic's `until` for long runs: `n` messages of `schema` (b"se00", b"6s4t", ...) have
    come; each message is looked at once."""
    state = {"looked": 0, "count": 0}

    def until(got):
        state["count"] += sum(m.value()[4:8] == schema for m in got[state["looked"]:])
        state["looked"] = len(got)
        return state["count"] >= n
    return until


# DAQ datagrams from loopback sources, and what reading them back must give -----------------------

CLI = [sys.executable, "-m", "ethdaq.soc.cli"]
SAMPLES = 32                     # per datagram, 16 bits each
PERIOD_NS = 8                    # 125 MS/s
T0 = 1_795_000_000_000_000_000   # a PTP time, ns


def samples(stream_id, seq):
    return (np.arange(seq * SAMPLES, (seq + 1) * SAMPLES) * 7 + stream_id * 1000) % 2**16


def datagram(stream_id, seq):
    return pack_header(stream_id, seq, T0 + seq * SAMPLES * PERIOD_NS, SAMPLES, 16, FLAG_TS_PTP) + \
        samples(stream_id, seq).astype(">u2").tobytes()


class Board:
    """A loopback source (127.0.0.N) sending DAQ datagrams of its streams to a receiver port."""
    def __init__(self, ip, port, streams=(0, 1)):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((ip, 0))
        self.port, self.streams = port, streams
        self.next = {sid: 0 for sid in streams}
        self.key = lambda sid: (int.from_bytes(socket.inet_aton(ip), "big"), self.sock.getsockname()[1], sid)

    def send(self, n):
        for _ in range(n):
            for sid in self.streams:
                self.sock.sendto(datagram(sid, self.next[sid]), ("127.0.0.1", self.port))
                self.next[sid] += 1

    def names(self):
        return {stream_name(self.key(sid)): (sid, self.next[sid]) for sid in self.streams}


def start_recv(cwd, *extra, port=0):
    """`ethdaq recv` on 127.0.0.1 (port 0: a free one, read back from its first line)."""
    if port == 0:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    p = subprocess.Popen(CLI + ["recv", "--bind", "127.0.0.1", "--port", str(port), "--progress", "off", *extra],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)
    line = p.stderr.readline()
    if "receiving on UDP" not in line:
        p.kill()
        raise AssertionError(line + p.stderr.read())
    return p, port


def decode(messages):
    """{schema id: [(key, deserialised message)]} with the ESS schemas' own deserialisers; se00
    entries have the message's `datagrams` header third."""
    from streaming_data_types import deserialise_6s4t, deserialise_pl72, deserialise_se00, deserialise_x5f2
    by_id = {b"se00": deserialise_se00, b"x5f2": deserialise_x5f2, b"pl72": deserialise_pl72,
             b"6s4t": deserialise_6s4t}
    out = {k: [] for k in by_id}
    for m in messages:
        schema = m.value()[4:8]
        entry = (m.key(), by_id[schema](m.value()))
        if schema == b"se00":
            entry += (int(dict(m.headers())["datagrams"]),)
        out[schema].append(entry)
    return out


def check_streams(decoded, boards):
    """Every sample of every stream exactly once, in order, with its PTP time, period and counter;
    returns the last x5f2 status of each stream."""
    expected = {}
    for b in boards:
        expected.update(b.names())
    per_stream = {}
    for key, msg, datagrams in decoded[b"se00"]:
        assert key == msg.name.encode()
        per_stream.setdefault(msg.name, []).append((msg, datagrams))
    assert sorted(per_stream) == sorted(expected)
    for name, msgs in per_stream.items():
        sid, n = expected[name]
        firsts = np.cumsum([0] + [d for _, d in msgs])      # each message's first seq, from the headers
        assert firsts[-1] == n
        assert [m.message_counter for m, _ in msgs] == list(firsts[:-1])
        assert all(m.channel == sid and len(m.values) == d * SAMPLES for m, d in msgs)
        assert [m.timestamp_unix_ns for m, _ in msgs] == [T0 + seq * SAMPLES * PERIOD_NS for seq in firsts[:-1]]
        assert all(m.sample_ts_delta == PERIOD_NS for m, d in msgs[1:]) and msgs[0][0].sample_ts_delta in (0, PERIOD_NS)
        np.testing.assert_array_equal(np.concatenate([m.values for m, _ in msgs]),
                                      np.concatenate([samples(sid, seq) for seq in range(n)]))
    status = {}
    for key, msg in decoded[b"x5f2"]:
        s = json.loads(msg.status_json)
        assert key == s["stream"].encode()
        status[s["stream"]] = s
    assert sorted(status) == sorted(expected)
    return status
