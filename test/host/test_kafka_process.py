#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""`ethdaq recv --kafka` publishes from a process of its own: it never outlives the receiver
(killed, or stopped with SIGTERM), its counters reach the run summary and add up with what the
topic holds, and when it dies mid-run the receiver goes on and counts what it did not publish."""

import json
import os
import signal
import time
import uuid
from pathlib import Path

from ethdaq.host import h5file
from ethdaq.host.recv import EXIT_UNPUBLISHED
from kafka_helpers import Board, decode, read_topic, seen, start_recv


def _topic():
    return f"ethdaq-process-{uuid.uuid4().hex[:8]}"


def _stat(pid):
    """(state, parent pid, nice) of a process from /proc, or None once it has gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text.rsplit(")", 1)[1].split()
    return fields[0], int(fields[1]), int(fields[16])


def _publishers(parent):
    """Pids of the publishing processes whose parent is `parent`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (_stat(entry) or ("", 0, 0))[1] == parent:
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if b"ethdaq.host.pubworker" in cmd:
                found.append(int(entry))
    return found


def _gone(pid, timeout=60.0):
    """True once `pid` has exited (gone, or a zombie nobody reaps), within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = _stat(pid)
        if st is None or st[0] in ("Z", "X"):
            return True
        time.sleep(0.1)
    return False


def test_publishing_process_exits_when_the_receiver_is_killed(kafka_broker, tmp_path):
    """The receiver killed (SIGKILL): its publishing process (--kafka-nice steps nicer than it)
    exits on its own."""
    topic = _topic()
    p, port = start_recv(tmp_path, "--kafka", kafka_broker.bootstrap, "--topic", topic, "--kafka-nice", "7")
    try:
        Board("127.0.0.12", port).send(10)
        read_topic(kafka_broker.bootstrap, topic, seen(b"se00", 20))
        children = _publishers(p.pid)
        assert len(children) == 1, children
        assert _stat(children[0])[2] == min(19, _stat(p.pid)[2] + 7)
        p.kill()                                   # No chance to close the run.
        p.wait(timeout=60)
        assert _gone(children[0]), f"publishing process {children[0]} outlived its receiver"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_counts_add_up_through_the_process_boundary(kafka_broker, tmp_path):
    """SIGTERM mid-run with a ring too small for a burst (--kafka-queue 16): the summary's
    published count per stream is exactly what the topic holds, its unpublished counts are the
    receive loop's queue_full, the final status messages say the same, and the publishing
    process has ended when the receiver has."""
    topic = _topic()
    p, port = start_recv(tmp_path, "-o", "run.h5", "--kafka", kafka_broker.bootstrap, "--topic", topic,
                         "--kafka-queue", "16")
    board = Board("127.0.0.13", port)
    try:
        board.send(4)
        read_topic(kafka_broker.bootstrap, topic, seen(b"se00", 8))
        children = _publishers(p.pid)
        assert len(children) == 1, children
        p.send_signal(signal.SIGSTOP)
        board.send(100)                            # One Batch of 200 on SIGCONT: more than the ring holds.
        p.send_signal(signal.SIGCONT)
        board.send(4)
        time.sleep(1)
    finally:
        p.send_signal(signal.SIGCONT)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=120)
    assert p.returncode == EXIT_UNPUBLISHED, err
    assert _gone(children[0], timeout=10), "the publishing process outlived a receiver stopped by SIGTERM"
    summary = json.loads((tmp_path / "run.json").read_text())
    assert (summary["packets"], summary["missing"], summary["stopped_by"]) == (216, 0, "SIGTERM")
    k = summary["kafka"]
    assert k["received"] == 216 and k["published"] + k["unpublished"] == 216 and k["pending"] == 0
    assert k["queue_full"] > 0 and k["unpublished"] == k["queue_full"] and k["published"] >= 8
    decoded = decode(read_topic(kafka_broker.bootstrap, topic, seen(b"6s4t", 1)))
    on_topic = {}
    for _, m, d in decoded[b"se00"]:
        on_topic[m.name] = on_topic.get(m.name, 0) + d
    finals = {}
    for _, msg in decoded[b"x5f2"]:
        s = json.loads(msg.status_json)
        finals[s["stream"]] = s
    assert sorted(summary["streams"]) == sorted(on_topic) == sorted(finals) == sorted(board.names())
    for name, s in summary["streams"].items():
        assert s["published"] == on_topic[name] and s["published"] + s["unpublished"] == s["datagrams"] == 108
        f = finals[name]
        assert (f["received"], f["published"], f["unpublished"], f["pending"]) == (108, s["published"],
                                                                                   s["unpublished"], 0)


def test_publishing_process_killed_mid_run(kafka_broker, tmp_path):
    """The publishing process killed: the receiver goes on receiving and writing, counts every
    datagram that process had not reported published as failed, and says so (exit status 5)."""
    topic = _topic()
    p, port = start_recv(tmp_path, "-o", "run.h5", "--kafka", kafka_broker.bootstrap, "--topic", topic)
    board = Board("127.0.0.14", port)
    try:
        board.send(10)
        read_topic(kafka_broker.bootstrap, topic, seen(b"se00", 20))
        children = _publishers(p.pid)
        assert len(children) == 1, children
        os.kill(children[0], signal.SIGKILL)
        assert _gone(children[0])
        time.sleep(1)
        board.send(10)
        time.sleep(1)
    finally:
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=120)
    assert p.returncode == EXIT_UNPUBLISHED, err
    summary = json.loads((tmp_path / "run.json").read_text())
    assert (summary["packets"], summary["missing"]) == (40, 0)
    k = summary["kafka"]
    assert k["received"] == 40 and k["published"] + k["unpublished"] == 40 and k["pending"] == 0
    assert k["published"] <= 20 and k["failed"] >= 20 and k["unpublished"] == k["failed"]
    assert "publishing process ended" in k["last_client_error"]
    with h5file.open_run(tmp_path / "run.h5") as run:
        for name, (sid, n) in board.names().items():
            assert list(run.packets(name)["seq"]) == list(range(n))
