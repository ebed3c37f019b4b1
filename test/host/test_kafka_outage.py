#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""A broker stopped, or frozen, in the middle of a run: `ethdaq recv --kafka` keeps receiving and
writing every datagram meanwhile, and what it queued reaches the topic once the broker is back:
every sample exactly once and in order, published = received. A broker of its own per test."""

import json
import os
import signal
import time
import uuid

import pytest

from ethdaq.host import h5file
from kafka_helpers import Board, check_streams, decode, read_topic, running_broker, seen, start_recv


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


def test_blocked_broker_never_reduces_the_run_file(broker, tmp_path):
    """The broker frozen (SIGSTOP: its connections stay open and nothing answers) while a burst
    arrives: every datagram is still received and written to the run file, none missing or
    dropped by the kernel; once the broker runs again every sample reaches the topic exactly once
    and in order."""
    topic = f"ethdaq-blocked-{uuid.uuid4().hex[:8]}"
    p, port = start_recv(tmp_path, "-o", "run.h5", "--kafka", broker.bootstrap, "--topic", topic)
    board = Board("127.0.0.10", port)
    try:
        board.send(20)
        read_topic(broker.bootstrap, topic, seen(b"se00", 40))
        os.kill(broker.proc.pid, signal.SIGSTOP)
        try:
            board.send(1500)                                     # 3000 datagrams while it is frozen
            time.sleep(2)
        finally:
            os.kill(broker.proc.pid, signal.SIGCONT)
        board.send(20)
        got = read_topic(broker.bootstrap, topic, seen(b"se00", 3080), timeout=180)
    finally:
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    summary = json.loads((tmp_path / "run.json").read_text())
    assert (summary["packets"], summary["missing"], summary["kernel_dropped"]) == (3080, 0, 0)
    with h5file.open_run(tmp_path / "run.h5") as run:
        assert sorted(run.streams) == sorted(board.names())
        for name, (sid, n) in board.names().items():
            assert list(run.packets(name)["seq"]) == list(range(n))
    assert len(decode(got)[b"se00"]) == 3080
    decoded = decode(read_topic(broker.bootstrap, topic, seen(b"6s4t", 1)))
    check_streams(decoded, [board])
    k = summary["kafka"]
    assert (k["received"], k["published"], k["unpublished"]) == (3080, 3080, 0)
