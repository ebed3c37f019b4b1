"""Helpers for the Migen tests of byte streams (eth_phy_description(8) endpoints)."""

from migen.sim import passive


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


def collect_frames(source, out, cycles):
    """Take `source` (always ready) for `cycles` cycles, appending each whole frame (bytes, up to
    and including the byte with `last`) to `out`."""
    cur = []
    for _ in range(cycles):
        yield source.ready.eq(1)
        yield
        if (yield source.valid):
            cur.append((yield source.data))
            if (yield source.last):
                out.append(bytes(cur))
                cur = []
