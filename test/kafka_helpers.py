#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Reading a topic back from the test broker: every partition from its beginning, no consumer group."""

import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition


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
