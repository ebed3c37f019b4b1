#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""ethdaq.host.se00's template-built messages against ess-streaming-data-types: every message
decodes with the library's own deserialise_se00 to exactly what the library's serialise_se00
gives for the same content (field by field, the values' dtype and bytes), for every value type
of the schema, several vector lengths (as one datagram or runs of them carry) and names. Its
decoder against the library's deserialise_se00: the same result for messages from either
serialiser, with and without per-sample timestamps, and for mangled messages either the library's
result or a ValueError, never another exception."""

import numpy as np
import pytest
from streaming_data_types.array_1d_se00 import deserialise_se00, numpy_type_map, serialise_se00
from streaming_data_types.fbschemas.array_1d_se00.Location import Location

from ethdaq.host.se00 import Encoder, decode

DTYPES = sorted(numpy_type_map, key=str)
T0 = 1_795_000_000_000_000_000


def _same(ours, theirs):
    _same_result(deserialise_se00(theirs), deserialise_se00(ours))


def _same_result(a, b):
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


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [0, 1, 716, 716 * 8])
def test_the_decoder_gives_the_librarys_result(dtype, n):
    rng = np.random.default_rng(n + 1)
    encode = Encoder()
    values = _values(dtype, n, rng)
    stamps = T0 + np.cumsum(rng.integers(0, 100, n))
    for message, timestamps in [(encode("192.168.1.50_5001_s0", 3, T0, 8, 2**40 + 3, values), None),
                                (serialise_se00("x", 65535, T0 + 1, 1_000_000, 7, values, ts_location=Location.End), None),
                                (serialise_se00("127.0.0.2_65535_s7", 0, 1, 0, 0, values, value_timestamps=stamps), stamps)]:
        ours = decode(message)
        _same_result(deserialise_se00(message), ours)
        assert list(ours.values) == list(values)
        assert (ours.value_ts is None) if timestamps is None else list(ours.value_ts) == list(timestamps)


def test_the_decoder_refuses_what_lies_outside_the_message():
    """Truncated and byte-flipped messages: the library's result where both read one, else a
    ValueError (the merge counts it as undecodable), never a read past the end."""
    rng = np.random.default_rng(7)
    good = [Encoder()("192.168.1.50_5001_s0", 0, T0, 8, 5, np.arange(40, dtype=np.uint16)),
            serialise_se00("abc", 1, T0, 8, 5, np.arange(9, dtype=np.int32),
                           value_timestamps=np.arange(9, dtype=np.int64))]
    refused = same = 0
    for message in good:
        cases = [message[:k] for k in range(0, len(message), 3)]
        for _ in range(1500):
            m = bytearray(message)
            for i in rng.integers(0, len(m), rng.integers(1, 4)):
                m[i] = int(rng.integers(0, 256))
            cases.append(bytes(m))
        for m in cases:
            try:
                ours = decode(m)
            except ValueError:
                refused += 1
                continue
            _same_result(deserialise_se00(m), ours)
            same += 1
    assert refused > 100 and same > 100
