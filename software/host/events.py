#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Event channels: the one definition of how a front-end's events travel as samples, and their
reassembly on the host.

A front-end declares a channel of events with the width of their id (`event_id_bits`,
gateware/frontend.py; IDENTIFY carries it, ethdaq.wire.protocol.IDENTIFY_EVENT). Each event is
two fields, its PTP time in ns (TIME_BITS = 64) and its id (1 to 31 bits), sent as a run of
samples of the build's sample width W:

    word 0 .. I-1        the id, W-1 bits per word, most significant first
    word I .. I+T-1      the time, W-1 bits per word, most significant first

with I = ceil(id bits / (W-1)) and T = ceil(64 / (W-1)) words; each field is right-aligned in
its words (the unused high bits 0). The top bit of every word (bit W-1) is 1 in an event's first
word and 0 in the others: the host finds events by it, so a run that starts in the middle of an
event, a datagram lost on the network or samples the board dropped cost the events they cut, never
the alignment of the ones after. With 16-bit samples and a 12-bit id that is 6 words:

    word 0   1 000 iiii iiii iiii     (marker, id)
    word 1   0 000 0000 000t tttt     (time bits 63..60)
    word 2   0 ttt tttt tttt tttt     (time bits 59..45)
    ...
    word 5   0 ttt tttt tttt tttt     (time bits 14..0)

Reassembly (Assembler) keeps a stream's unfinished event across datagrams only from one datagram
to the next of the same run with no samples dropped between them (header `seq` + 1, the same
`dropped`); words that make no whole event are counted (`discarded_words`), never published.
"""

from typing import NamedTuple

import numpy as np

TIME_BITS = 64


def layout(sample_bits, id_bits):
    """(id words, time words) of an event with an id of `id_bits` in samples of `sample_bits`."""
    per_word = sample_bits - 1
    return -(-id_bits // per_word), -(-TIME_BITS // per_word)


def words_per_event(sample_bits, id_bits):
    return sum(layout(sample_bits, id_bits))


def pack(time_ns, event_id, sample_bits, id_bits):
    """One event's words (a list of ints), as a front-end sends them."""
    if not 0 <= event_id < 1 << id_bits:
        raise ValueError(f"event id must be 0 to {(1 << id_bits) - 1}, not {event_id}")
    if not 0 <= time_ns < 1 << TIME_BITS:
        raise ValueError(f"event time must be 0 to 2**64 - 1 ns, not {time_ns}")
    per_word = sample_bits - 1
    id_words, time_words = layout(sample_bits, id_bits)
    mask = (1 << per_word) - 1
    words = [(event_id >> (per_word * (id_words - 1 - k))) & mask for k in range(id_words)]
    words += [(time_ns >> (per_word * (time_words - 1 - k))) & mask for k in range(time_words)]
    words[0] |= 1 << per_word
    return words


def _field(columns, per_word):
    """The value of a field from its words (a 2-d array, one event per row), as uint64: bits past
    64 (the zero padding above a 64-bit time) fall off."""
    value = np.zeros(len(columns), np.uint64)
    mask = np.uint64((1 << per_word) - 1)
    for k in range(columns.shape[1]):
        shift = per_word * (columns.shape[1] - 1 - k)
        if shift < 64:
            value |= (columns[:, k] & mask) << np.uint64(shift)
    return value


class Assembler:
    """One event channel's events from its datagrams' samples, in order of arrival."""

    def __init__(self, sample_bits, id_bits):
        self.sample_bits, self.id_bits = sample_bits, id_bits
        self.id_words, self.time_words = layout(sample_bits, id_bits)
        self.words = self.id_words + self.time_words
        self.discarded_words = 0      # Words that made no whole event.
        self._carry = np.zeros(0, np.uint64)
        self._after = None            # (run, seq, dropped) of the datagram the carry ends.

    def drop_carry(self):
        """Discards (and counts) the unfinished event carried over, as at the end of a stream."""
        self.discarded_words += len(self._carry)
        self._carry = self._carry[:0]

    def feed(self, samples, run, seq, dropped):
        """The whole events that end in one datagram's `samples`: (times ns as uint64, ids as
        int32). A datagram that does not follow the last one fed (another run, a seq gap, samples
        dropped between them, or a late one) discards the unfinished event carried over."""
        samples = samples.astype(np.uint64) if isinstance(samples, np.ndarray) else np.array(samples, np.uint64)
        if self._after != (run, seq - 1, dropped) and len(self._carry):
            self.discarded_words += len(self._carry)
            self._carry = self._carry[:0]
        words = np.concatenate((self._carry, samples)) if len(self._carry) else samples
        self._after = (run, seq, dropped)
        n = self.words
        marker = np.uint64(1 << (self.sample_bits - 1))
        starts = np.flatnonzero(words & marker)
        if not len(starts):
            self.discarded_words += len(words)
            self._carry = words[:0]
            return np.zeros(0, np.uint64), np.zeros(0, np.int32)
        ends = np.append(starts[1:], len(words))        # Where each run of words from a marker ends.
        whole = (ends - starts) == n
        last = starts[-1]
        if len(words) - last < n:                       # The last event is unfinished: carried.
            whole[-1] = False
            self._carry = words[last:].copy()
            used = int(len(words) - last)
        else:
            self._carry = words[:0]
            used = 0
        self.discarded_words += int(starts[0]) + int((ends - starts)[~whole].sum()) - used
        rows = words[starts[whole][:, None] + np.arange(n)]
        per_word = self.sample_bits - 1
        ids = _field(rows[:, :self.id_words], per_word).astype(np.int32)
        times = _field(rows[:, self.id_words:], per_word)
        return times, ids


class State(NamedTuple):
    """Where reassembly of one event channel stands between blocks of datagrams (reassemble()):
    the words of the unfinished event at the end (`carry`), the (run, seq, dropped) of the
    datagram they end, and the words that made no whole event so far."""
    carry: np.ndarray = np.zeros(0, np.uint64)
    after: tuple = None
    discarded: int = 0


def reassemble(state, samples, counts, run, seq, dropped, late, sample_bits, id_bits):
    """The whole events of a block of one channel's datagrams in arrival order, all at once, as
    Assembler.feed one datagram after another would give them: a datagram continues the unfinished
    event of the one before it only when it follows it (same run and dropped, seq + 1), and a late
    datagram (one that filled a gap) gives the events whole in it on its own, leaving the channel's
    carry alone. `samples` are the datagrams' words back to back, `counts` how many each has.
    Returns (times ns as uint64, ids as int32, the index of the datagram each event ends in, the
    new State), events in the order of those datagrams. A pure function: the same block from the
    same State gives the same result."""
    n = words_per_event(sample_bits, id_bits)
    counts = np.asarray(counts, np.int64)
    late = np.asarray(late, bool)
    first = np.zeros(len(counts), np.int64)
    np.cumsum(counts[:-1], out=first[1:])
    main, alone = np.flatnonzero(~late), np.flatnonzero(late)
    order = np.concatenate((main, alone))
    # The block's words: the carry, then the datagrams that continue the channel, then late ones.
    c = len(state.carry)
    at = np.zeros(len(order), np.int64)                 # Each ordered datagram's first word, after the carry.
    np.cumsum(counts[order][:-1], out=at[1:])
    at += c
    pick = np.repeat(first[order] - at, counts[order]) + np.arange(c, c + counts.sum())
    samples = np.asarray(samples)
    if samples.dtype.kind != "u":
        samples = samples.astype(np.uint64)
    words = np.concatenate((state.carry.astype(samples.dtype), samples[pick]))   # Native width: less to move.
    # Segments: words that may hold one event between them. A datagram that does not follow the
    # one before it starts one, as does every late datagram.
    keys = np.stack([np.asarray(a, np.int64)[main] for a in (run, seq, dropped)], axis=1)
    follows = np.zeros(len(main), bool)
    if len(main):
        follows[1:] = (keys[1:, 0] == keys[:-1, 0]) & (keys[1:, 1] == keys[:-1, 1] + 1) & \
            (keys[1:, 2] == keys[:-1, 2])
        follows[0] = state.after is not None and tuple(state.after) == (keys[0, 0], keys[0, 1] - 1, keys[0, 2])
    main_end = c + int(counts[main].sum())
    bounds = np.unique(np.concatenate(([0], at[:len(main)][~follows], at[len(main):], [main_end])))
    marks = np.flatnonzero(words >> (sample_bits - 1))
    nxt = np.append(bounds, len(words))[np.searchsorted(bounds, marks, side="right")]
    next_mark = np.append(marks[1:], len(words))
    ends = np.minimum(next_mark, nxt)
    # Whole: n words from its marker within its segment, ended by the next marker or by the end
    # of the datagram its last word is in (Assembler decides an event in that datagram: words
    # after it that carry no marker are strays of their own).
    last_end = np.append(at, len(words))[np.searchsorted(at, marks + n - 1, side="right")]
    whole = (ends - marks >= n) & (np.minimum(next_mark, last_end) == marks + n)
    # The unfinished event at the end of the channel's last segment is carried to the next block.
    open_start = bounds[np.searchsorted(bounds, main_end, side="right") - 2] if main_end else 0
    carried = np.flatnonzero((ends == main_end) & (marks >= open_start) & (ends - marks < n))
    carry = words[marks[carried[0]]:main_end].copy() if len(carried) else words[:0]
    rows = words[marks[whole][:, None] + np.arange(n)].astype(np.uint64)
    per_word = sample_bits - 1
    id_words = layout(sample_bits, id_bits)[0]
    times = _field(rows[:, id_words:], per_word)
    ids = _field(rows[:, :id_words], per_word).astype(np.int32)
    where = order[np.searchsorted(at, marks[whole] + n - 1, side="right") - 1] if len(order) else \
        np.zeros(0, np.int64)
    by_datagram = np.argsort(where, kind="stable")
    after = tuple(int(k) for k in keys[-1]) if len(main) else state.after
    discarded = state.discarded + len(words) - n * int(whole.sum()) - len(carry)
    return times[by_datagram], ids[by_datagram], where[by_datagram], State(carry, after, discarded)
