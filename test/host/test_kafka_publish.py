#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""`ethdaq recv --kafka` and ethdaq.host.publisher against a real broker: datagrams from loopback
boards, read back from the topic and decoded with the ESS schemas' own deserialisers."""

import json
import signal
import subprocess
import uuid

import h5py
import pytest

from ethdaq.host import h5file, publisher, rxcore
from ethdaq.host.publisher import Publisher, PublishError
from ethdaq.host.recv import EXIT_UNPUBLISHED, batches
from kafka_helpers import CLI, Board, check_streams, decode, read_topic, seen, start_recv


def _topic():
    return f"ethdaq-test-{uuid.uuid4().hex[:8]}"


def _stopped(decoded):
    return len(decoded[b"6s4t"]) == 1


def test_recv_publishes_every_datagram(kafka_broker, tmp_path):
    topic = _topic()
    p, port = start_recv(tmp_path, "-o", "run.h5", "--kafka", kafka_broker.bootstrap, "--topic", topic,
                         "--count", "240", "--kafka-option", "compression.type=lz4")
    boards = [Board("127.0.0.2", port), Board("127.0.0.3", port)]
    for b in boards:
        b.send(60)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    decoded = decode(read_topic(kafka_broker.bootstrap, topic, lambda got: _stopped(decode(got))))
    status = check_streams(decoded, boards)
    for s in status.values():      # The final status: every counter adds up.
        assert (s["received"], s["published"], s["unpublished"], s["pending"], s["lost"]) == (60, 60, 0, 0, 0)
    (_, start), = decoded[b"pl72"]
    (_, stop), = decoded[b"6s4t"]
    summary = json.loads((tmp_path / "run.json").read_text())
    assert start.job_id == stop.job_id == summary["run_uuid"]
    assert start.filename == "run.h5" and start.broker == kafka_broker.bootstrap
    k = summary["kafka"]
    assert (k["received"], k["published"], k["unpublished"], k["topic"]) == (240, 240, 0, topic)
    assert all(s["published"] == 60 for s in summary["streams"].values())
    with h5py.File(tmp_path / "run.h5") as f:
        assert json.loads(f.attrs["summary"])["kafka"]["published"] == 240
    assert f"Kafka {topic}: published 240, unpublished 0" in out.splitlines()[-2]


def test_runs_of_datagrams_in_one_message(kafka_broker, tmp_path):
    """--kafka-batch 8: consecutive datagrams of a stream share a message, never across a gap."""
    topic = _topic()
    p, port = start_recv(tmp_path, "--kafka", kafka_broker.bootstrap, "--topic", topic, "--kafka-batch", "8",
                         "--count", "80")
    board = Board("127.0.0.9", port)
    board.send(40)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    decoded = decode(read_topic(kafka_broker.bootstrap, topic, lambda got: _stopped(decode(got))))
    status = check_streams(decoded, [board])
    assert max(d for *_, d in decoded[b"se00"]) > 1 and all(d <= 8 for *_, d in decoded[b"se00"])
    assert all((s["received"], s["published"], s["unpublished"]) == (40, 40, 0) for s in status.values())
    assert "Kafka " + topic + ": published 80, unpublished 0" in out


def test_publisher_api(kafka_broker):
    topic = _topic()
    with rxcore.RxCore(bind="127.0.0.1", port=0) as core, \
            Publisher(kafka_broker.bootstrap, topic=topic, run_name="api") as pub:
        board = Board("127.0.0.4", core.port, streams=(3,))
        board.send(20)
        for batch in batches(core=core, count=20, idle_timeout=10):
            pub.publish(batch)
    assert pub.totals()["published"] == 20 and pub.totals()["unpublished"] == 0
    decoded = decode(read_topic(kafka_broker.bootstrap, topic, lambda got: _stopped(decode(got))))
    check_streams(decoded, [board])
    assert decoded[b"pl72"][0][1].run_name == "api"


@pytest.mark.parametrize("args, message", [
    (["--kafka-option", "compression.type"], "a Kafka option is key=value"),
    (["--kafka-option", "no.such.setting=1"], "Kafka client settings refused: No such configuration property"),
    (["--kafka-config", "/nonexistent.properties"], "cannot read the Kafka configuration /nonexistent.properties"),
])
def test_bad_kafka_settings_are_one_line(args, message, tmp_path):
    r = subprocess.run(CLI + ["recv", "--port", "0", "--kafka", "127.0.0.1:9", *args, "--duration", "1"],
                       capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.startswith(f"Error: {message}"), r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args", [["--kafka-option", "acks=1"], ["--kafka-batch", "4"], ["--kafka-nice", "3"]])
def test_kafka_settings_need_brokers(args):
    r = subprocess.run(CLI + ["recv", "--port", "0", *args, "--duration", "1"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "give the brokers with --kafka" in r.stderr


def test_config_file(tmp_path):
    cfg = tmp_path / "client.properties"
    cfg.write_text("# TLS to a real cluster\nsecurity.protocol = SSL\n\nbatch.size=65536\n")
    assert publisher.read_config(cfg) == {"security.protocol": "SSL", "batch.size": "65536"}
    cfg.write_text("security.protocol\n")
    with pytest.raises(PublishError, match=r"client.properties:1: expected key=value"):
        publisher.read_config(cfg)


def test_broker_down_at_start(tmp_path):
    """Nothing listens on the brokers' port: every datagram is still received and written, each
    is counted unpublished (delivery timed out), and the exit status says so."""
    from ethdaq.kafkabroker import free_port
    p, port = start_recv(tmp_path, "-o", "run.h5", "--kafka", f"127.0.0.1:{free_port()}", "--count", "100",
                         "--kafka-option", "message.timeout.ms=2000")
    board = Board("127.0.0.5", port)
    board.send(50)
    out, err = p.communicate(timeout=60)
    assert p.returncode == EXIT_UNPUBLISHED, err
    assert "not every datagram reached Kafka" in err and "exit status 5" in err
    summary = json.loads((tmp_path / "run.json").read_text())
    assert summary["packets"] == 100 and summary["missing"] == 0
    k = summary["kafka"]
    assert (k["received"], k["published"], k["unpublished"], k["pending"], k["buffer_full"]) == (100, 0, 100, 0, 0)
    assert k["client_errors"] > 0 and "Connection refused" in k["last_client_error"]
    assert all(s["unpublished"] == 50 for s in summary["streams"].values())
    with h5file.open_run(tmp_path / "run.h5") as run:   # the local file has everything all the same
        assert sum(info.n_packets for info in run.streams.values()) == 100


def test_full_local_queue_never_stalls_receive(tmp_path):
    """A queue of 10 messages and no broker: the rest are refused at once and counted."""
    from ethdaq.kafkabroker import free_port
    p, port = start_recv(tmp_path, "--kafka", f"127.0.0.1:{free_port()}", "--count", "200",
                         "--kafka-option", "queue.buffering.max.messages=10", "--kafka-option", "message.timeout.ms=1000")
    Board("127.0.0.7", port).send(100)
    out, err = p.communicate(timeout=60)
    assert p.returncode == EXIT_UNPUBLISHED, err
    totals = out.splitlines()[-1]
    assert totals.startswith("200 datagrams") and "Kafka ethdaq: published 0, unpublished 200 (" in totals
    refused = int(totals.split("unpublished 200 (")[1].split()[0])
    assert 190 - 10 <= refused < 200    # the pl72 and at most 10 datagrams fit the queue


def test_lost_datagrams_in_status(kafka_broker, tmp_path):
    """A datagram missing on the network: the status counts it lost, the rest is published, and no
    message's run of datagrams spans the gap."""
    topic = _topic()
    p, port = start_recv(tmp_path, "--kafka", kafka_broker.bootstrap, "--topic", topic, "--count", "9",
                         "--kafka-batch", "16")
    board = Board("127.0.0.8", port, streams=(0,))
    board.send(4)
    board.next[0] += 1                  # seq 4 never sent
    board.send(5)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 3, err       # data lost takes precedence over anything Kafka says
    decoded = decode(read_topic(kafka_broker.bootstrap, topic, lambda got: _stopped(decode(got))))
    seqs = [list(range(m.message_counter, m.message_counter + d)) for _, m, d in decoded[b"se00"]]
    assert sum(seqs, []) == [0, 1, 2, 3, 5, 6, 7, 8, 9]
    assert all(4 not in run and run[-1] - run[0] == len(run) - 1 for run in seqs)
    final = json.loads(decoded[b"x5f2"][-1][1].status_json)
    assert (final["received"], final["lost"], final["published"], final["unpublished"]) == (9, 1, 9, 0)


def test_publishing_queue_full_is_counted_and_the_file_has_everything(kafka_broker, tmp_path):
    """A receiver paused while 100 datagrams arrive (SIGSTOP) reads them as one Batch, larger than
    its publishing queue (--kafka-queue 10): counted unpublished, every one still in the run file;
    the datagrams before it are published, and what is published is in order, each stream's."""
    topic = _topic()
    p, port = start_recv(tmp_path, "-o", "run.h5", "--kafka", kafka_broker.bootstrap, "--topic", topic,
                         "--kafka-queue", "10")
    board = Board("127.0.0.11", port)
    try:
        board.send(5)
        read_topic(kafka_broker.bootstrap, topic, seen(b"se00", 10))
        p.send_signal(signal.SIGSTOP)
        board.send(50)
        p.send_signal(signal.SIGCONT)
        board.send(5)
    finally:
        p.send_signal(signal.SIGCONT)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    assert p.returncode == EXIT_UNPUBLISHED, err
    summary = json.loads((tmp_path / "run.json").read_text())
    assert (summary["packets"], summary["missing"]) == (120, 0)
    k = summary["kafka"]
    assert k["received"] == 120 and k["published"] + k["unpublished"] == 120
    assert k["queue_full"] >= 20 and k["unpublished"] == k["queue_full"] and k["published"] >= 10
    assert all(s["published"] + s["unpublished"] == 60 for s in summary["streams"].values())
    assert f"unpublished {k['unpublished']} ({k['queue_full']} refused: local queue full)" in out.splitlines()[-2]
    with h5file.open_run(tmp_path / "run.h5") as run:
        assert run.summary["kafka"]["queue_full"] == k["queue_full"]
        for name, (sid, n) in board.names().items():
            assert list(run.packets(name)["seq"]) == list(range(n))
    decoded = decode(read_topic(kafka_broker.bootstrap, topic, seen(b"6s4t", 1)))
    assert sum(d for *_, d in decoded[b"se00"]) == k["published"]
    for name in board.names():
        seqs = [m.message_counter for _, m, _ in decoded[b"se00"] if m.name == name]
        assert seqs == sorted(set(seqs)) and seqs[:5] == list(range(5))
