#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""ethdaq.kafkabroker: Kafka's pinned jars fetched and checked, and a real single-node broker that
librdkafka (confluent-kafka) talks to."""

import subprocess
import sys
import uuid

import pytest

from ethdaq import kafkabroker
from ethdaq.kafkabroker import BrokerError
from kafka_helpers import read_topic


@pytest.fixture
def mirror(tmp_path):
    """A Maven-layout copy of two locked jars as file:// URLs, and a lock file naming them."""
    jars = kafkabroker.locked_jars()[:2]
    lines = []
    for group, artifact, version, sha in jars:
        d = tmp_path / "repo" / group.replace(".", "/") / artifact / version
        d.mkdir(parents=True)
        (d / f"{artifact}-{version}.jar").write_bytes((kafkabroker.CACHE / f"{artifact}-{version}.jar").read_bytes())
        lines.append(f"{group}:{artifact}:{version}  {sha}")
    lock = tmp_path / "jars.lock"
    lock.write_text("# test\n" + "\n".join(lines) + "\n")
    return f"file://{tmp_path / 'repo'}", lock, jars


def test_lock_pins_one_kafka_release():
    jars = kafkabroker.locked_jars()
    kafka = {v for g, a, v, _ in jars if g == "org.apache.kafka"}
    assert kafka == {kafkabroker.kafka_version()} and kafkabroker.kafka_version().startswith("4.1.")
    assert all(len(sha) == 64 and int(sha, 16) >= 0 for *_, sha in jars)
    assert {"kafka_2.13", "kafka-server", "kafka-raft", "kafka-metadata", "kafka-storage", "scala-library"} <= \
        {a for _, a, _, _ in jars}


def test_fetch_downloads_once_and_checks(mirror, tmp_path):
    base, lock, jars = mirror
    cache = tmp_path / "cache"
    assert kafkabroker.fetch(cache, lock, out=open("/dev/null", "w"), base=base) == 2
    assert kafkabroker.fetch(cache, lock, out=open("/dev/null", "w"), base=base) == 0   # everything present
    damaged = cache / f"{jars[0][1]}-{jars[0][2]}.jar"
    damaged.write_bytes(b"not a jar")
    assert kafkabroker.fetch(cache, lock, out=open("/dev/null", "w"), base=base) == 1
    assert kafkabroker._sha256(damaged) == jars[0][3]


def test_fetch_refuses_a_jar_that_does_not_match_the_lock(mirror, tmp_path):
    base, lock, jars = mirror
    group, artifact, version, _ = jars[0]
    served = tmp_path / "repo" / group.replace(".", "/") / artifact / version / f"{artifact}-{version}.jar"
    served.write_bytes(served.read_bytes() + b"\0")
    with pytest.raises(BrokerError, match=r"sha256 [0-9a-f]{64} does not match") as e:
        kafkabroker.fetch(tmp_path / "cache", lock, out=open("/dev/null", "w"), base=base)
    assert "\n" not in str(e.value)
    assert not (tmp_path / "cache" / served.name).exists()


def test_missing_jars_name_make_kafka(tmp_path):
    with pytest.raises(BrokerError, match=r"Apache Kafka is not installed .* run `make kafka`"):
        kafkabroker.KafkaBroker(cache=tmp_path)
    r = subprocess.run([sys.executable, "-m", "ethdaq.kafkabroker", "run"], capture_output=True, text=True,
                       env={"ETHDAQ_KAFKA_CACHE": str(tmp_path), "PATH": "/usr/bin:/bin"}, timeout=60)
    assert r.returncode == 1 and r.stderr.startswith("Error: Apache Kafka is not installed")
    assert len(r.stderr.strip().splitlines()) == 1


def test_unreachable_broker_does_not_answer():
    assert not kafkabroker.ping(f"127.0.0.1:{kafkabroker.free_port()}", timeout=1.0)


def test_broker_round_trip(kafka_broker):
    from confluent_kafka import Producer
    assert kafka_broker.bootstrap.startswith("127.0.0.1:")
    topic = f"roundtrip-{uuid.uuid4().hex[:8]}"
    p = Producer({"bootstrap.servers": kafka_broker.bootstrap})
    for i in range(10):
        p.produce(topic, key=b"k", value=f"m{i}".encode())
    assert p.flush(30) == 0
    got = read_topic(kafka_broker.bootstrap, topic, lambda got: len(got) >= 10)
    assert [m.value().decode() for m in got] == [f"m{i}" for i in range(10)]
