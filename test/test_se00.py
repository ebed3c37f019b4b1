#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""ethdaq.host.se00's template-built messages against ess-streaming-data-types: every message
decodes with the library's own deserialise_se00 to exactly what the library's serialise_se00
gives for the same content (field by field, the values' dtype and bytes), for every value type
of the schema, several vector lengths (as one datagram or runs of them carry) and names."""

import numpy as np
import pytest
from streaming_data_types.array_1d_se00 import deserialise_se00, numpy_type_map, serialise_se00
from streaming_data_types.fbschemas.array_1d_se00.Location import Location

from ethdaq.host.se00 import Encoder

DTYPES = sorted(numpy_type_map, key=str)
T0 = 1_795_000_000_000_000_000


def _same(ours, theirs):
    a, b = deserialise_se00(theirs), deserialise_se00(ours)
    for field in a._fields:
        x, y = getattr(a, field), getattr(b, field)
        if isinstance(x, np.ndarray):
            assert y.dtype == x.dtype and y.shape == x.shape and y.tobytes() == x.tobytes(), field
        else:
            assert type(y) is type(x) and y == x, (field, x, y)


def _values(dtype, n, rng):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return rng.standard_normal(n).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [0, 1, 3, 716, 716 * 8, 716 * 64])
def test_decodes_like_the_librarys_serialiser(dtype, n):
    rng = np.random.default_rng(n)
    encode = Encoder()
    for name, channel, ts, delta, counter in [("192.168.1.50_5001_s0", 0, T0, 8, 0),
                                              ("127.0.0.2_65535_s7", 7, T0 + 12345, 0, 2**40 + 3),
                                              ("x", 65535, 1, 1_000_000, 1)]:
        values = _values(dtype, n, rng)
        theirs = serialise_se00(name, channel, ts, delta, counter, values, ts_location=Location.Start)
        _same(encode(name, channel, ts, delta, counter, values), theirs)


def test_template_reused_across_messages_keeps_each_messages_fields():
    """One template per stream: a message's fields never leak into the next one's."""
    encode = Encoder()
    msgs = [encode("s", 1, T0 + k, 8, k, np.arange(k, dtype=np.uint16)) for k in range(5)]
    for k, m in enumerate(msgs):
        r = deserialise_se00(m)
        assert (r.timestamp_unix_ns, r.message_counter, list(r.values)) == (T0 + k, k, list(range(k)))


def test_samples_are_aligned_to_their_size():
    """FlatBuffers' verifiers (C++, Rust) refuse a vector whose elements are not aligned."""
    encode = Encoder()
    for name in ["a", "ab", "abc", "abcd", "abcde"]:
        for dtype in (np.uint16, np.uint32, np.uint64):
            values = np.arange(3, dtype=dtype)
            m = encode(name, 0, T0, 8, 0, values)
            start = len(m) - values.nbytes                  # the samples end the message
            assert m[start:] == values.astype(np.dtype(dtype).newbyteorder("<")).tobytes()
            assert start % np.dtype(dtype).itemsize == 0 and start % 4 == 0
            assert int.from_bytes(m[start - 4:start], "little") == 3


def test_byte_swapped_input_is_written_little_endian():
    values = np.arange(5, dtype=">u2")
    r = deserialise_se00(Encoder()("s", 0, T0, 8, 0, values))
    assert r.values.dtype == np.uint16 and list(r.values) == list(range(5))
