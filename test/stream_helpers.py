"""Helpers for the Migen tests of byte streams (eth_phy_description(8) endpoints)."""

import zlib

from migen.sim import passive

PREAMBLE = bytes([0x55] * 7 + [0xD5])   # Seven preamble bytes and the SFD.


def wire(frame, fcs_flip=0, padding=True):
    """What 802.3 puts on the line for `frame` (bytes, or a scapy packet), as a PHY carries it:
    preamble and SFD, the frame padded with zeros to 60 bytes (`padding`), its FCS xor `fcs_flip`.
    Independent of every implementation under test."""
    body = bytes(frame)
    if padding:
        body += bytes(max(0, 60 - len(body)))
    return PREAMBLE + body + (zlib.crc32(body) ^ fcs_flip).to_bytes(4, "little")


@passive
def send_frames(sink, frames, rng=None, gaps=0.0, errors=None, between=0):
    """Offer `frames` (bytes each) on `sink`, a byte per cycle while `ready`: `last` and `last_be`
    on each frame's last byte, `error` on the byte indices `errors[k]` of frame k; with `rng`,
    `valid` drops before a byte with probability `gaps`; `between` idle cycles after each frame.
    Passive: the simulation ends with the (bounded) reader, also when the sink stops taking."""
    for k, f in enumerate(frames):
        for i, b in enumerate(f):
            while rng is not None and rng.random() < gaps:
                yield sink.valid.eq(0)
                yield
            yield sink.valid.eq(1)
            yield sink.data.eq(b)
            yield sink.last.eq(i == len(f) - 1)
            yield sink.last_be.eq(i == len(f) - 1)
            if errors is not None:
                yield sink.error.eq(i in errors[k])
            yield
            while not (yield sink.ready):
                yield
        yield sink.valid.eq(0)
        for _ in range(between):
            yield
    while True:
        yield


def collect_frames(source, out, cycles, count=None, ready=1.0, rng=None, fields=()):
    """Take `source` for up to `cycles` cycles, a word in a cycle (with probability `ready`,
    drawn from `rng`), appending each whole frame to `out`: its bytes (words of more than a byte
    in wire order, lane 0 first, the last one cut at `last_be`) or, with `fields` (names of
    `source`'s other fields), (bytes, {name: its value at the last word}). Returns after
    `count` frames, if given."""
    nb, cur = len(source.data)//8, b""
    for _ in range(cycles):
        take = 1 if ready >= 1 else int(rng.random() < ready)
        yield source.ready.eq(take)
        yield
        if take and (yield source.valid):
            word = (yield source.data).to_bytes(nb, "little")
            if nb > 1 and (yield source.last):
                word = word[:(yield source.last_be).bit_length()]
            cur += word
            if (yield source.last):
                values = {}
                for name in fields:
                    values[name] = yield getattr(source, name)
                out.append((cur, values) if fields else cur)
                cur = b""
                if len(out) == count:
                    return
