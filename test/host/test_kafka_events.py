#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Event channels published as ev44: the words of the example pulse-height analyser's events (its
Python model, examples/frontends/pulse_height_model.py, packed as ethdaq.host.events lays them
out) sent from a loopback board whose IDENTIFY (a board on loopback answering with the event
layouts) names the channel; `ethdaq recv --kafka --board-ip` publishes it to a real broker, and
the messages are read back with ess-streaming-data-types' own deserialise_ev44. Also the host's
reassembly on its own: events cut by the run's start, a lost datagram or dropped samples."""

import dataclasses
import itertools
import json
import socket
import sys
import uuid

import numpy as np
import pytest

from conftest import REPO
from ethdaq.host import events
from ethdaq.wire.daqformat import FLAG_TS_PTP, pack_header
from ethdaq.host.pubworker import ev44_times
from kafka_helpers import read_topic, start_recv

sys.path.insert(0, str(REPO / "examples" / "frontends"))
try:
    import pulse_height_model as model
finally:
    sys.path.pop(0)

T0 = 1_795_000_000_123_456_789   # PTP time at the analyser's reset, ns
STAMP_NS = 13_000                # Each datagram's header timestamp: T0 + seq * STAMP_NS
SAMPLES = 40                     # Per datagram: not a multiple of an event's 6 words.
EVENT_CHANNEL = 2
STRAY = 3                        # The run starts with the last 3 words of an event.


def model_events(n):
    """The model's first `n` events (time, id) and their words, after STRAY words of an event
    before them."""
    evs = list(itertools.islice(model.events(lambda cycle: T0 + 8 * cycle), n + 1))
    words = events.pack(*evs[0], 16, model.EVENT_ID_BITS)[-STRAY:]
    for t, i in evs[1:]:
        words += events.pack(t, i, 16, model.EVENT_ID_BITS)
    return evs[1:], words


def datagrams(words, stream_id=EVENT_CHANNEL, skip=()):
    """[(seq, datagram)] of `words`, SAMPLES a datagram, the last one shorter; seqs in `skip` are
    left out (lost on the network)."""
    out = []
    for seq, at in enumerate(range(0, len(words), SAMPLES)):
        chunk = np.array(words[at:at + SAMPLES], ">u2")
        if seq not in skip:
            out.append((seq, pack_header(stream_id, seq, T0 + seq * STAMP_NS, len(chunk), 16, FLAG_TS_PTP)
                        + chunk.tobytes()))
    return out


# The host's reassembly ----------------------------------------------------------------------------

def test_events_are_reassembled_across_datagrams_and_a_run_that_starts_inside_one_costs_its_words():
    evs, words = model_events(50)
    asm = events.Assembler(16, model.EVENT_ID_BITS)
    got = []
    for seq, at in enumerate(range(0, len(words), SAMPLES)):
        times, ids = asm.feed(words[at:at + SAMPLES], run=1, seq=seq, dropped=0)
        got += zip(times.tolist(), ids.tolist())
    assert got == evs and asm.discarded_words == STRAY


@pytest.mark.parametrize("cut", ["seq gap", "dropped", "run"])
def test_an_event_cut_by_a_gap_is_discarded_and_counted_and_the_next_ones_are_whole(cut):
    evs, words = model_events(30)
    asm = events.Assembler(16, model.EVENT_ID_BITS)
    first, second = words[:SAMPLES], words[2 * SAMPLES:]        # The datagram between is lost.
    t1, i1 = asm.feed(first, run=1, seq=0, dropped=0)
    after = {"seq gap": dict(run=1, seq=2, dropped=0), "dropped": dict(run=1, seq=1, dropped=40),
             "run": dict(run=2, seq=1, dropped=0)}[cut]
    t2, i2 = asm.feed(second, **after)
    got = list(zip(t1.tolist() + t2.tolist(), i1.tolist() + i2.tolist()))
    # Whole events: those with every word in the two datagrams that came.
    starts = [STRAY + 6 * j for j in range(len(evs))]
    whole = [e for e, s in zip(evs, starts) if s + 6 <= SAMPLES or s >= 2 * SAMPLES]
    assert got == whole
    assert asm.discarded_words == len(words) - SAMPLES - 6 * len(whole)


@pytest.mark.parametrize("sample_bits, id_bits, words", [(8, 7, 11), (16, 12, 6), (16, 15, 6), (16, 16, 7),
                                                          (32, 31, 4), (64, 31, 3)])
def test_the_layout_in_every_sample_width_round_trips(sample_bits, id_bits, words):
    assert events.words_per_event(sample_bits, id_bits) == words
    evs = [(2**64 - 1, 2**id_bits - 1), (T0, 0), (0, 1), (T0 + 1, 2**id_bits // 3)]
    stream = [w for e in evs for w in events.pack(*e, sample_bits, id_bits)]
    assert all(0 <= w < 2**sample_bits for w in stream)
    assert sum(w >> (sample_bits - 1) for w in stream) == len(evs)      # One marker per event.
    times, ids = events.Assembler(sample_bits, id_bits).feed(stream, run=0, seq=0, dropped=0)
    assert list(zip(times.tolist(), ids.tolist())) == evs


def test_a_time_of_flight_past_int32_gets_a_reference_of_its_own():
    stamp = T0
    times = np.array([T0 - 5, T0 + 2**31 - 1, T0 + 3 * 10**9, T0 + 3 * 10**9 + 7], np.uint64)
    ref, index, tof = ev44_times([(stamp, times), (T0 + 4 * 10**9, np.array([T0 + 4 * 10**9 + 1], np.uint64))])
    assert ref.tolist() == [T0, T0 + 3 * 10**9, T0 + 4 * 10**9]
    assert index.tolist() == [0, 2, 4]
    assert tof.tolist() == [-5, 2**31 - 1, 0, 7, 1]


# Through a real broker ---------------------------------------------------------------------------

def _decode(messages):
    from streaming_data_types import deserialise_ev44, deserialise_se00, deserialise_x5f2
    out = {b"ev44": [], b"se00": [], b"x5f2": []}
    for m in messages:
        schema = m.value()[4:8]
        if schema in out:
            out[schema].append((m, {b"ev44": deserialise_ev44, b"se00": deserialise_se00,
                                    b"x5f2": deserialise_x5f2}[schema](m.value())))
    return out


def _stopped(got):
    return any(m.value()[4:8] == b"6s4t" for m in got)


@pytest.mark.parametrize("skip", [(), (4,)], ids=["whole", "a datagram lost"])
def test_recv_publishes_an_event_channel_named_by_identify_as_ev44(kafka_broker, tmp_path, skip):
    from board_fakes import IDENTITY, fake_board
    board = fake_board(4, ident=dataclasses.replace(IDENTITY, event_id_bits=(0, 0, model.EVENT_ID_BITS, 0)))
    topic = f"ethdaq-test-{uuid.uuid4().hex[:8]}"
    evs, words = model_events(60)
    event_dgrams = datagrams(words, skip=skip)
    sample_dgrams = [pack_header(0, seq, T0 + seq * 320, 40, 16, FLAG_TS_PTP) + np.arange(40, dtype=">u2").tobytes()
                     for seq in range(3)]
    try:
        p, port = start_recv(tmp_path, "--kafka", kafka_broker.bootstrap, "--topic", topic, "--board-ip",
                             "127.0.0.1", "--board-port", str(board.port), "--count",
                             str(len(event_dgrams) + len(sample_dgrams)))
        note = p.stderr.readline()    # The line after "receiving on ...".
        src = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        src.bind(("127.0.0.1", 0))
        for _, d in event_dgrams:
            src.sendto(d, ("127.0.0.1", port))
        for d in sample_dgrams:
            src.sendto(d, ("127.0.0.1", port))
        out, err = p.communicate(timeout=60)
    finally:
        board.close()
    assert p.returncode == (3 if skip else 0), err
    assert note == f"event channels of 127.0.0.1, published as ev44: 2 ({model.EVENT_ID_BITS}-bit ids)\n"
    decoded = _decode(read_topic(kafka_broker.bootstrap, topic, _stopped))
    name = f"127.0.0.1_{src.getsockname()[1]}_s{EVENT_CHANNEL}"
    msgs = decoded[b"ev44"]
    # One message per datagram of the event channel, keyed and named by its stream, in order.
    assert [(m.key(), e.source_name, e.message_id) for m, e in msgs] == [(name.encode(), name, seq)
                                                                         for seq, _ in event_dgrams]
    assert all(len(e.reference_time) == 1 and e.reference_time_index.tolist() == [0] for _, e in msgs)
    assert [int(e.reference_time[0]) for _, e in msgs] == [T0 + seq * STAMP_NS for seq, _ in event_dgrams]
    got = [(int(e.reference_time[0]) + int(tof), int(pixel))
           for _, e in msgs for tof, pixel in zip(e.time_of_flight, e.pixel_id)]
    # Every event whose words all arrived, as the model made it: its PTP time, its peak as pixel_id.
    starts = [STRAY + 6 * j for j in range(len(evs))]
    lost = {range(s * SAMPLES, (s + 1) * SAMPLES) for s in skip}
    whole = [e for e, s in zip(evs, starts) if not any(s in r or s + 5 in r for r in lost)]
    assert got == whole
    assert len(evs) - 8 * len(skip) <= len(whole) <= len(evs) - 7 * len(skip)   # 40 words: 7 or 8 events
    # The sample channel is still se00.
    assert [s.message_counter for _, s in decoded[b"se00"]] == [0, 1, 2]
    status = [json.loads(x.status_json) for _, x in decoded[b"x5f2"]]
    final = [s for s in status if s["stream"] == name][-1]
    assert final["events"] == len(whole) and final["published"] == len(event_dgrams)
    assert final["event_words_discarded"] == len(words) - SAMPLES * len(skip) - 6 * len(whole)
    # The totals line says it too.
    assert (f"published {len(event_dgrams) + 3}, unpublished 0; events {len(whole)} (ev44), words of no whole "
            f"event {final['event_words_discarded']}") in out


def test_a_late_datagram_gives_its_own_whole_events_and_leaves_the_streams_carry_alone():
    """Datagrams 0, 2, 3, then 1 (late, filling the gap), then 4: 1's whole events are published
    with it, and the event from 3 into 4 is whole, as without the late one."""
    from streaming_data_types import deserialise_ev44

    from ethdaq.host import pubworker
    from ethdaq.host.batch import PACKET_DTYPE, Batch
    evs, words = model_events(40)
    order = [0, 2, 3, 1, 4]
    p = np.zeros(len(order), PACKET_DTYPE)
    p["src_ip"], p["src_port"], p["stream_id"], p["sample_bits"], p["sample_count"] = 0x7F000001, 5001, 2, 16, SAMPLES
    p["seq"], p["late"] = order, [seq == 1 for seq in order]
    p["timestamp"] = [T0 + seq * STAMP_NS for seq in order]
    p["offset"] = np.arange(len(order)) * SAMPLES * 2
    payload = b"".join(np.array(words[seq * SAMPLES:(seq + 1) * SAMPLES], ">u2").tobytes() for seq in order)
    sent = []

    class Producer:
        def produce(self, topic, value, key, headers, on_delivery):
            sent.append(deserialise_ev44(value))
            on_delivery(None, None)
    sender = pubworker.Sender.__new__(pubworker.Sender)   # No Kafka client: its messages only.
    sender.datagrams_per_message, sender.sent, sender._names, sender._producer, sender.topic = 1, {}, {}, Producer(), "t"
    sender._event_ids = {(0x7F000001, 2): model.EVENT_ID_BITS}
    batch = Batch(p, np.frombuffer(payload, np.uint8))
    sender._publish_now(batch, [(key, batch.select(key)) for key in batch.keys()], {})
    got = {e.message_id: [(int(e.reference_time[0]) + int(t), int(i)) for t, i in zip(e.time_of_flight, e.pixel_id)]
           for e in sent}
    starts = [STRAY + 6 * j for j in range(len(evs))]

    def ending_in(seq, first):
        """The events whose last word is in datagram `seq` and first in `first` or later."""
        return [e for e, s in zip(evs, starts) if s >= first * SAMPLES and seq * SAMPLES <= s + 5 < (seq + 1) * SAMPLES]
    assert [e.message_id for e in sent] == order
    assert got[0] == ending_in(0, 0) and got[2] == ending_in(2, 2) and got[3] == ending_in(3, 2)
    assert got[1] == ending_in(1, 1)                     # Late: its own whole events only.
    assert got[4] == ending_in(4, 3)                     # The event from 3 into 4 is whole.
    assert len(got[4]) == len(ending_in(4, 0))
