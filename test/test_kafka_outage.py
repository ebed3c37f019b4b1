#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""A broker stopped in the middle of a run and started again: `ethdaq recv --kafka` keeps receiving
every datagram while it is down, and what it queued meanwhile reaches the topic once it is back:
every sample exactly once and in order, published = received. A broker of its own (it is stopped)."""

import json
import signal
import uuid

import pytest

from kafka_helpers import Board, check_streams, decode, read_topic, running_broker, start_recv


@pytest.fixture
def broker():
    with running_broker() as b:
        yield b


def _se00(n):
    return lambda got: len(decode(got)[b"se00"]) >= n


def test_broker_stopped_and_restarted_mid_run(broker, tmp_path):
    topic = f"ethdaq-outage-{uuid.uuid4().hex[:8]}"
    p, port = start_recv(tmp_path, "-o", "run.h5", "--kafka", broker.bootstrap, "--topic", topic)
    board = Board("127.0.0.6", port)
    try:
        board.send(40)
        read_topic(broker.bootstrap, topic, _se00(80))          # published while the broker is up
        broker.stop()
        board.send(40)                                           # received while it is down
        broker.start()                                           # same ports, same data
        board.send(40)
        got = read_topic(broker.bootstrap, topic, _se00(240), timeout=120)
    finally:
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    decoded = decode(read_topic(broker.bootstrap, topic, lambda got: len(decode(got)[b"6s4t"]) == 1))
    assert len(decode(got)[b"se00"]) == 240
    status = check_streams(decoded, [board])                     # exactly once, in order
    received = {}                                                # status once a second: counts only grow
    for key, msg in decoded[b"x5f2"]:
        received.setdefault(key, []).append(json.loads(msg.status_json)["received"])
    assert all(len(r) > 2 and r == sorted(r) and r[-1] == 120 for r in received.values()), received
    summary = json.loads((tmp_path / "run.json").read_text())
    assert summary["packets"] == 240 and summary["stopped_by"] == "SIGTERM"
    k = summary["kafka"]
    assert (k["received"], k["published"], k["unpublished"]) == (240, 240, 0)
    assert k["client_errors"] > 0                                # the outage was seen and counted
    for s in status.values():
        assert (s["received"], s["published"], s["unpublished"]) == (120, 120, 0)
