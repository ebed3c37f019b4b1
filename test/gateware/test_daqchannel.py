"""A DAQ channel's admission (gateware/daqchannel.py DAQChannel) at the edge of a full buffer.

The channel starts a datagram only when its sample buffer has room for all the datagram's words
(and its descriptor FIFO a slot). Here nothing reads the buffer, samples come every cycle, and the
datagram size puts the buffer's level exactly at, and one word past, the last level that leaves
room; the datagrams admitted must be those the rule admits, counted from the buffer's level:
`level + words per datagram <= buffer words`, where the level is the words written less the two
that the buffer's read stages take out of its RAM (LevelFIFO buffered), none read further.
"""

import pytest
from migen import run_simulation

from ethdaq.gateware.daqchannel import DAQChannel

BUFFER = 32          # Samples (16-bit: one per buffer word at dw=8).
STAGES = 2           # Words the buffered FIFO's two read stages hold outside its RAM's level.


def admitted_by_rule(need, descriptors=8):
    """Datagrams of `need` words the rule admits, back to back, into an unread buffer."""
    k = 0
    while k < descriptors:
        level = max(k*need - STAGES, 0)
        if level + need > BUFFER:
            break
        k += 1
    return k


def run_channel(max_samples, cycles=200):
    ch = DAQChannel(0, 16, BUFFER, descriptors=8)
    accepted = []

    def gen():
        yield ch.max_samples.eq(max_samples)
        yield ch.enable.eq(1)
        yield ch.flush.eq(0)
        yield ch.source.ready.eq(0)
        yield ch.desc.ready.eq(0)
        for _ in range(4):          # max_samples takes two cycles to apply.
            yield
        yield ch.start.eq(1)
        yield ch.running.eq(1)
        yield
        yield ch.start.eq(0)
        yield ch.sink.valid.eq(1)
        for _ in range(cycles):
            yield
            if (yield ch.accept):
                accepted.append(1)
    run_simulation(ch, gen())
    return len(accepted)


# 7 and 5 samples put the level at one word past the last level with room (k*need - 2 = 32 -
# need + 1) when a datagram starts; the others around them.
@pytest.mark.parametrize("max_samples", [4, 5, 6, 7, 8, 9, 13, 16, 17, 30, 32])
def test_datagrams_are_admitted_exactly_while_the_buffer_has_room(max_samples):
    assert run_channel(max_samples) == max_samples*admitted_by_rule(max_samples)
