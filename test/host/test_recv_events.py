#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Several boards' events through one `ethdaq recv`: two loopback boards (127.0.0.2 and
127.0.0.3, each answering IDENTIFY with its own event layout: 12-bit ids on one, 20-bit on the
other, so 6 and 7 words an event) send their event channel and a sample channel to one receiver,
which asks both (`--board-ip` twice). The run file keeps each event channel's events beside its
words, read back with h5py; with --kafka, each board's events go out as ev44 (read back with
deserialise_ev44) and `ethdaq merge` orders both boards' events by time. The expected events are
worked out from where each event's words lie and which datagrams were sent."""

import dataclasses
import json
import socket
import uuid

import h5py
import pytest

from ethdaq.wire.daqformat import FLAG_TS_PTP, pack_header
from kafka_helpers import read_topic, start_recv
from test_merge import merge
from test_merge_events import CHANNEL, SAMPLES, EventBoard

BOARDS = {"127.0.0.2": 12, "127.0.0.3": 20}     # address -> bits of its events' ids
N_EVENTS = {"127.0.0.2": 200, "127.0.0.3": 240}  # 30 and 42 datagrams of 40 words: 6 and 7 words an event
LOST = {"127.0.0.3": 11}                         # its datagram 11 is not sent (lost on the network)


def _boards(port):
    """The loopback boards' control sockets (all on one port) and their event channels."""
    from board_fakes import IDENTITY, fake_board
    ctl = []
    for k, (ip, bits) in enumerate(BOARDS.items()):
        ident = dataclasses.replace(IDENTITY, ip=int.from_bytes(socket.inet_aton(ip), "big"),
                                    event_id_bits=(0, 0, bits, 0))
        ctl.append(fake_board(6, ptp=True, ident=ident, addr=(ip, port)))
        port = ctl[-1].port
    return ctl, port


def _send(port, boards):
    """Each board's event datagrams (less the lost ones) and 3 sample datagrams of channel 0,
    interleaved; returns {ip: (EventBoard, seqs sent)} and the datagrams sent."""
    sent, total = {}, 0
    socks = {}
    for ip in BOARDS:
        socks[ip] = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        socks[ip].bind((ip, 0))
        b = EventBoard(ip, socks[ip].getsockname()[1], seed=len(sent), n=N_EVENTS[ip], id_bits=BOARDS[ip])
        sent[ip] = (b, [seq for seq in range(b.datagrams) if seq != LOST.get(ip)])
    for seq in range(max(b.datagrams for b, _ in sent.values())):
        for ip, (b, seqs) in sent.items():
            if seq in seqs:
                socks[ip].sendto(b.datagram(seq), ("127.0.0.1", port))
                total += 1
            if seq < 3:
                socks[ip].sendto(pack_header(0, seq, b.stamp(seq), 8, 16, FLAG_TS_PTP) + bytes(16), ("127.0.0.1", port))
                total += 1
    return sent, total


def _run(tmp_path, *extra):
    """`ethdaq recv -o run.h5 --board-ip A --board-ip B` with the boards answering, the data sent."""
    ctl, ctl_port = _boards(0)
    try:
        expected = sum(len(range(EventBoard(ip, 0, 0, N_EVENTS[ip], BOARDS[ip]).datagrams)) - (ip in LOST) + 3
                       for ip in BOARDS)
        p, port = start_recv(tmp_path, "-o", "run.h5", "--board-ip", "127.0.0.2", "--board-ip", "127.0.0.3",
                             "--board-port", str(ctl_port), "--count", str(expected), *extra)
        notes = [p.stderr.readline() for _ in BOARDS]
        sent, total = _send(port, BOARDS)
        assert total == expected
        out, err = p.communicate(timeout=120)
    finally:
        for board in ctl:
            board.close()
    assert p.returncode == 3, err            # 3: board 127.0.0.3's datagram 11 was lost
    return sent, out, err, notes


def _check_file(path, sent):
    """The file's events of each board's event channel are every event whose words all came, each
    with the datagram it ends in; the sample channels have none. Returns {stream name: [(time, id)]}."""
    got = {}
    with h5py.File(path) as f:
        streams = f["streams"]
        for ip, (b, seqs) in sent.items():
            g = streams[b.name]
            ev = g["events"]
            want = b.whole(set(seqs))
            times, ids, packet = ev["event_time"][()], ev["event_id"][()], ev["packet"][()]
            assert list(zip(times.tolist(), ids.tolist())) == [e for seq in sorted(want) for e in want[seq]]
            ends = [seq for seq in sorted(want) for _ in want[seq]]
            assert g["packets/seq"][()][packet].tolist() == ends       # the datagram each one ends in
            assert ev.attrs["id_bits"] == BOARDS[ip] and ev.attrs["words_per_event"] == b.per_event
            assert ev.attrs["words_discarded"] == SAMPLES * len(seqs) - b.per_event * len(times)
            assert ev.attrs["words_pending"] == 0 and ev.attrs["NX_class"] == "NXcollection"
            assert "events" not in streams[b.name.replace(f"_s{CHANNEL}", "_s0")]
            got[b.name] = list(zip(times.tolist(), ids.tolist()))
        # Each board's replies, under its own address.
        assert sorted(f["streams/board"]) == sorted(f"{section}_{ip.replace('.', '_')}" for ip in BOARDS for section in
                                                    ("identify", "config", "status_at_start", "ptp_at_start",
                                                     "status_at_end", "ptp_at_end"))
        assert f["streams/board/identify_127_0_0_3"].attrs["ip"] == 0x7F000003
    return got


def test_one_receiver_keeps_two_boards_events_in_its_run_file(tmp_path):
    sent, out, err, notes = _run(tmp_path)
    assert notes == [f"event channels of {ip}, kept as events in the run file: {CHANNEL} ({bits}-bit ids)\n"
                     for ip, bits in BOARDS.items()]
    assert "warning" not in err.replace("warning: this run lost data", ""), err
    got = _check_file(tmp_path / "run.h5", sent)
    summary = json.loads((tmp_path / "run.json").read_text())
    total = sum(len(v) for v in got.values())
    discarded = sum(SAMPLES * len(seqs) - b.per_event * len(got[b.name]) for b, seqs in sent.values())
    assert summary["file_events"] == {"channels": 2, "events": total, "event_words_discarded": discarded}
    for b, _ in sent.values():
        assert summary["streams"][b.name]["file_events"] == len(got[b.name])
    assert f"; events {total} of 2 event channels, words of no whole event {discarded})" in out
    from ethdaq.host.h5file import open_run
    with open_run(tmp_path / "run.h5") as run:
        b, _ = sent["127.0.0.2"]
        ev = run.events(b.name)
        assert list(zip(ev["event_time"].tolist(), ev["event_id"].tolist())) == got[b.name]
        assert run.events(b.name.replace(f"_s{CHANNEL}", "_s0")) is None


def test_two_boards_events_to_kafka_the_run_file_and_the_merge(kafka_broker, tmp_path):
    from streaming_data_types import deserialise_ev44
    topic = f"ethdaq-recv-ev-{uuid.uuid4().hex[:8]}"
    sent, out, err, notes = _run(tmp_path, "--kafka", kafka_broker.bootstrap, "--topic", topic)
    assert notes == [f"event channels of {ip}, published as ev44 and kept as events in the run file: "
                     f"{CHANNEL} ({bits}-bit ids)\n" for ip, bits in BOARDS.items()]
    in_file = _check_file(tmp_path / "run.h5", sent)
    msgs = [m for m in read_topic(kafka_broker.bootstrap, topic, lambda got: any(m.value()[4:8] == b"6s4t" for m in got))]
    ev44 = [deserialise_ev44(m.value()) for m in msgs if m.value()[4:8] == b"ev44"]
    for b, seqs in sent.values():
        mine = [e for e in ev44 if e.source_name == b.name]
        assert [e.message_id for e in mine] == seqs                 # one message per datagram, in order
        events = [(int(e.reference_time[0]) + int(t), int(i)) for e in mine for t, i in zip(e.time_of_flight, e.pixel_id)]
        assert events == in_file[b.name]                            # as the run file has them
    assert sum(m.value()[4:8] == b"se00" for m in msgs) == 6          # the sample channels
    # Both boards' events merged by time: each source's as published, the gap of the lost datagram counted.
    r = merge(tmp_path, kafka_broker.bootstrap, topic, "--until-stop", "--watermark", "1ms")
    assert r.returncode == 0, r.stderr
    with h5py.File(tmp_path / "merged.h5") as f:
        e = f["merged"]
        for b, _ in sent.values():
            g = e[b.name]
            assert list(zip(g["event_time"][()].tolist(), g["event_id"][()].tolist())) == in_file[b.name]
        assert e.attrs["event_gaps"] == 1 and e.attrs["late_events"] == 0 and e.attrs["event_sources"] == 2
        assert e.attrs["merged_events"] == sum(map(len, in_file.values())) == e["slices/events"][()].sum()
        summary = json.loads((tmp_path / "run.json").read_text())
        assert e.attrs["event_words_discarded"] == summary["file_events"]["event_words_discarded"]


def test_the_writer_keeps_each_event_once_across_flushes_and_an_interrupted_one(tmp_path):
    """Events cut by flushes (an event's words in two flushes) are whole, and a flush interrupted
    between the packets and the events (KeyboardInterrupt from a signal handler) leaves each
    event once after close()."""
    from ethdaq.host.h5file import Writer, open_run
    from test_h5file import _InterruptOnce
    from test_merge_events import ID_BITS, event_batch
    b = EventBoard("127.0.0.2", 5001, 7, 120)                      # 18 datagrams
    w = Writer(tmp_path / "run.h5", flush_interval=1e9, events={("127.0.0.2", CHANNEL): ID_BITS})
    w.write(event_batch(b, [(seq, 0) for seq in range(5)]))
    w.flush()
    w.write(event_batch(b, [(seq, 0) for seq in range(5, 11)]))
    g = w._groups[b.name]
    g.events_ds = dict(g.events_ds, event_id=_InterruptOnce(g.events_ds["event_id"]))
    with pytest.raises(KeyboardInterrupt):
        w.flush()
    w.write(event_batch(b, [(seq, 0) for seq in range(11, b.datagrams)]))
    w.close()
    with open_run(tmp_path / "run.h5") as run:
        ev = run.events(b.name)
        assert list(zip(ev["event_time"].tolist(), ev["event_id"].tolist())) == list(zip(b.times, b.ids))
        want = b.whole(set(range(b.datagrams)))
        assert ev["packet"].tolist() == [seq for seq in sorted(want) for _ in want[seq]]
        assert (ev["words_discarded"], ev["words_pending"]) == (0, 0)
        assert run.packets(b.name)["seq"].tolist() == list(range(b.datagrams))
