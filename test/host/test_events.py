#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""ethdaq.host.events.reassemble (a block of datagrams at once, as the run file's writer uses it)
against Assembler fed one datagram at a time the way the publishing process feeds it (a late
datagram on its own), on random streams of events cut into datagrams, with datagrams lost, late,
repeated, samples dropped and runs restarted, split into blocks at random places."""

import numpy as np
import pytest

from ethdaq.host import events


def _one_at_a_time(datagrams, sample_bits, id_bits):
    """[(time, id, datagram index)] and the words discarded, by Assembler as pubworker uses it."""
    asm, out = events.Assembler(sample_bits, id_bits), []
    for k, (words, run, seq, dropped, late) in enumerate(datagrams):
        if late:
            alone = events.Assembler(sample_bits, id_bits)
            times, ids = alone.feed(words, run, seq, dropped)
            alone.drop_carry()
            asm.discarded_words += alone.discarded_words
        else:
            times, ids = asm.feed(words, run, seq, dropped)
        out += [(t, i, k) for t, i in zip(times.tolist(), ids.tolist())]
    return out, asm.discarded_words, len(asm._carry)


def _random_datagrams(rng, sample_bits, id_bits, n_events=300):
    stream = []
    t = int(rng.integers(0, 2**62))
    for _ in range(n_events):
        t += int(rng.integers(1, 10**6))
        stream += events.pack(t, int(rng.integers(0, 2**id_bits)), sample_bits, id_bits)
        if rng.random() < 0.05:                 # Stray words between events (a broken front-end).
            stream += [int(w) for w in rng.integers(0, 2**(sample_bits - 1), int(rng.integers(1, 4)))]
    out, at, seq, run, dropped = [], 0, 0, 1, 0
    while at < len(stream):
        size = int(rng.integers(1, 30))
        words = stream[at:at + size]
        at += size
        r = rng.random()
        if r < 0.05:
            seq += 1                            # Lost on the network.
            continue
        if r < 0.08:
            dropped += int(rng.integers(1, 50))   # Samples the board dropped.
        elif r < 0.10:
            run, seq = run + 1, 0               # The board started a new run.
        out.append([words, run, seq, dropped, 0])
        if r > 0.95 and len(out) > 2:           # One that came late, and one repeated late.
            k = int(rng.integers(0, len(out) - 1))
            late = list(out[k])
            late[4] = 1
            out.insert(int(rng.integers(k + 1, len(out) + 1)), late)
        seq += 1
    return out


@pytest.mark.parametrize("sample_bits, id_bits", [(16, 12), (8, 7), (32, 31), (64, 20), (16, 1)])
@pytest.mark.parametrize("seed", range(4))
def test_reassemble_in_blocks_is_assembler_one_datagram_at_a_time(sample_bits, id_bits, seed):
    rng = np.random.default_rng(seed)
    datagrams = _random_datagrams(rng, sample_bits, id_bits)
    want, discarded, pending = _one_at_a_time(datagrams, sample_bits, id_bits)
    assert len(want) > 100
    state, got, k = events.State(), [], 0
    while k < len(datagrams):                   # Blocks of random sizes, one datagram or many.
        block = datagrams[k:k + int(rng.integers(1, 40))]
        words = [w for d in block for w in d[0]]
        cols = list(zip(*block))
        times, ids, where, new = events.reassemble(state, np.array(words, np.uint64), [len(w) for w in cols[0]],
                                                   cols[1], cols[2], cols[3], cols[4], sample_bits, id_bits)
        again = events.reassemble(state, np.array(words, np.uint64), [len(w) for w in cols[0]],
                                  cols[1], cols[2], cols[3], cols[4], sample_bits, id_bits)
        assert [a.tolist() for a in again[:3]] == [times.tolist(), ids.tolist(), where.tolist()]   # Pure.
        got += [(t, i, k + w) for t, i, w in zip(times.tolist(), ids.tolist(), where.tolist())]
        state, k = new, k + len(block)
    assert got == want
    assert state.discarded == discarded and len(state.carry) == pending


def test_a_block_of_late_datagrams_only_leaves_the_carry():
    words = events.pack(10**18, 5, 16, 12) + events.pack(10**18 + 1, 6, 16, 12)
    s = events.reassemble(events.State(), np.array(words[:8], np.uint64), [8], [1], [0], [0], [0], 16, 12)[3]
    assert len(s.carry) == 2 and s.after == (1, 0, 0)
    times, ids, where, s2 = events.reassemble(s, np.array(words[:6], np.uint64), [6], [1], [7], [0], [1], 16, 12)
    assert ids.tolist() == [5] and where.tolist() == [0]      # The late one's own event.
    assert s2.carry.tolist() == s.carry.tolist() and s2.after == s.after
    times, ids, _, s3 = events.reassemble(s2, np.array(words[8:], np.uint64), [4], [1], [1], [0], [0], 16, 12)
    assert times.tolist() == [10**18 + 1] and ids.tolist() == [6] and s3.discarded == 0
