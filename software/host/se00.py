#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""se00 (ess-streaming-data-types' array_1d_se00 schema) messages from a prebuilt FlatBuffers
template: the parts that are the same for every message of a stream (the vtables, the name, the
value type) are laid out once; a message is the template with its timestamp, period and counter
written in, the vector length, and the samples' bytes. It decodes with the library's own
deserialise_se00 to exactly what its serialise_se00 gives, at a small fraction of the cost of its
pure-Python FlatBuffers builder (bench/scaleout.py, docs/scaleout.md).

    encode = Encoder()
    value = encode("192.168.1.50_5001_s0", 0, timestamp_ns, period_ns, seq, samples)
    decode(value)      # the library's SampleEnvironmentData, as its deserialise_se00 gives it

decode() reads any producer's se00 message (the merge's consumer), a few struct reads where the
library's generated accessors take about three times as long.

Layout (little-endian, every field written, so the vtable never changes):

    0   root offset -> table            4  file identifier "se00"
    8   vtable: 22 bytes, 9 fields      32 table: soffset to the vtable, name offset, then
        packet_timestamp i64, time_delta f64, message_counter i64 (8-aligned), channel i32, values offset, values_type u8, timestamp_location i8
    then the values union's table (one vector field) with its vtable, the name string, padding
    so that the samples are aligned to their size, the vector's length and the samples.
"""

import functools
import struct

import numpy as np

# Schema fields as the generated se00_SampleEnvironmentData reader numbers them (slot i lives at
# vtable entry i): name 0, channel 1, packet_timestamp 2, time_delta 3, timestamp_location 4,
# values_type 5, values 6, timestamps 7, message_counter 8.
_FIELDS = 9
_VTABLE = 8
_TABLE = 32
# Field -> byte offset inside the table (0: absent).
_OFFSETS = {0: 4, 2: 8, 3: 16, 8: 24, 1: 32, 6: 36, 5: 40, 4: 41}
_TABLE_SIZE = 44
_VARIABLE = struct.Struct("<qdq")        # packet_timestamp, time_delta, message_counter at _TABLE + 8
_LENGTH = struct.Struct("<I")


def _union_types():
    from streaming_data_types.array_1d_se00 import numpy_type_map
    return numpy_type_map


def _location_start():
    from streaming_data_types.fbschemas.array_1d_se00.Location import Location
    return Location.Start


def template(name, channel, dtype, ts_location=None):
    """The bytes of a message up to and including the vector length field (left 0), with every
    per-message field 0; returns (bytearray, offset of the vector length)."""
    dtype = np.dtype(dtype)
    values_type = _union_types()[dtype.newbyteorder("=")]
    location = _location_start() if ts_location is None else ts_location
    name_bytes = name.encode()
    buf = bytearray(_TABLE + _TABLE_SIZE)
    struct.pack_into("<I4s", buf, 0, _TABLE, b"se00")
    struct.pack_into(f"<HH{_FIELDS}H", buf, _VTABLE, 4 + 2 * _FIELDS, _TABLE_SIZE,
                     *[_OFFSETS.get(i, 0) for i in range(_FIELDS)])
    struct.pack_into("<i", buf, _TABLE, _TABLE - _VTABLE)
    struct.pack_into("<i", buf, _TABLE + _OFFSETS[1], channel)
    struct.pack_into("<Bb", buf, _TABLE + _OFFSETS[5], values_type, location)
    # The values union: a table whose one field (slot 0) is the vector, after its own vtable.
    union_vtable = len(buf)                                 # 76, 4-aligned
    buf += struct.pack("<HHH2x", 6, 8, 4)
    union_table = len(buf)
    buf += struct.pack("<i", union_table - union_vtable)
    union_field = len(buf)
    buf += bytes(4)
    name_at = len(buf)
    buf += _LENGTH.pack(len(name_bytes)) + name_bytes + b"\0"
    align = max(4, dtype.itemsize)                          # samples aligned to their size
    buf += bytes((-(len(buf) + 4)) % align)
    length_at = len(buf)
    buf += bytes(4)
    struct.pack_into("<I", buf, _TABLE + _OFFSETS[0], name_at - (_TABLE + _OFFSETS[0]))
    struct.pack_into("<I", buf, _TABLE + _OFFSETS[6], union_table - (_TABLE + _OFFSETS[6]))
    struct.pack_into("<I", buf, union_field, length_at - union_field)
    return buf, length_at


class Encoder:
    """Encodes se00 messages; keeps one template per (name, channel, dtype)."""

    def __init__(self):
        self._templates = {}

    def __call__(self, name, channel, timestamp_ns, sample_ts_delta, message_counter, values):
        """`values`: a 1-d numpy array of a dtype the schema has (uint8/16/32/64, int..., float32/64),
        any byte order; written little-endian as FlatBuffers wants."""
        values = np.asarray(values)
        key = (name, channel, values.dtype)
        t = self._templates.get(key)
        if t is None:
            t = self._templates[key] = template(name, channel, values.dtype)
        buf, length_at = t
        head = bytearray(buf)
        _VARIABLE.pack_into(head, _TABLE + _OFFSETS[2], timestamp_ns, sample_ts_delta, message_counter)
        _LENGTH.pack_into(head, length_at, values.size)
        if values.dtype.byteorder == ">" or (values.dtype.byteorder == "=" and not _LITTLE):
            values = values.astype(values.dtype.newbyteorder("<"))
        return b"".join((head, np.ascontiguousarray(values).data))


_LITTLE = np.little_endian


# Decoding --------------------------------------------------------------------------------------
#
# A FlatBuffers reader for se00 alone: the root table's vtable gives each field's place, every
# offset is checked against the buffer, and the values come out as a numpy view of the message.
# It returns what the library's deserialise_se00 returns for any message (ours, the library's own
# serialiser's, another producer's) and raises ValueError where a field lies outside the buffer;
# its per-message cost is a few struct reads instead of the library's generic accessors.

_U16, _I32, _U32 = struct.Struct("<H"), struct.Struct("<i"), struct.Struct("<I")
_SCALARS = {1: (struct.Struct("<i"), 0), 2: (struct.Struct("<q"), 0), 3: (struct.Struct("<d"), 0.0),
            4: (struct.Struct("<b"), 0), 5: (struct.Struct("<B"), 0), 8: (struct.Struct("<q"), 0)}
_INT64 = np.dtype("<i8")


@functools.cache
def _library():
    """The library's result type, and values_type -> numpy dtype as its flag map gives them."""
    from streaming_data_types.array_1d_se00 import Response, flag_map
    from flatbuffers.number_types import to_numpy_type
    return Response, {k: np.dtype(to_numpy_type(flags)) for k, flags in flag_map.items()}


class _Reader:
    """Bounds-checked reads of one buffer."""

    def __init__(self, buf):
        self.buf, self.size = buf, len(buf)

    def unpack(self, s, at):
        if at < 0 or at + s.size > self.size:
            raise ValueError(f"se00: a field at byte {at} lies outside the {self.size}-byte message")
        return s.unpack_from(self.buf, at)[0]

    def table(self, at):
        """{slot: absolute position} of the fields present in the table at `at`."""
        vtable = at - self.unpack(_I32, at)
        slots = (self.unpack(_U16, vtable) - 3) // 2      # Entries that start inside the vtable.
        if vtable + 4 + 2 * slots > self.size:
            raise ValueError(f"se00: the vtable at byte {vtable} runs past the {self.size}-byte message")
        offsets = struct.unpack_from(f"<{slots}H", self.buf, vtable + 4) if slots > 0 else ()
        return {slot: at + off for slot, off in enumerate(offsets) if off}

    def target(self, at):
        """Where the uoffset at `at` points."""
        return at + self.unpack(_U32, at)

    def vector(self, at, itemsize):
        """(position, length) of the vector the uoffset at `at` points to."""
        start = self.target(at)
        n = self.unpack(_U32, start)
        if start + 4 + n * itemsize > self.size:
            raise ValueError(f"se00: a vector of {n} items at byte {start} runs past the {self.size}-byte message")
        return start + 4, n

    def array(self, at, dtype):
        """The vector the uoffset at `at` points to, as a numpy view."""
        start, n = self.vector(at, dtype.itemsize)
        return np.frombuffer(self.buf, dtype=dtype, count=n, offset=start)


def decode(buf):
    """se00 message -> the library's SampleEnvironmentData (its deserialise_se00's result)."""
    Response, types = _library()
    r = _Reader(buf)
    if bytes(buf[4:8]) != b"se00":
        raise ValueError(f"se00: file identifier {bytes(buf[4:8])!r}, not b'se00'")
    fields = r.table(r.target(0))
    scalars = {slot: r.unpack(fmt, fields[slot]) if slot in fields else default
               for slot, (fmt, default) in _SCALARS.items()}
    if 0 not in fields:
        raise ValueError("se00: the message has no name")
    start, n = r.vector(fields[0], 1)
    name = bytes(buf[start:start + n]).decode()
    dtype = types.get(scalars[5])
    if dtype is None or 6 not in fields:
        raise ValueError(f"se00: values of type {scalars[5]}, not a type the schema has")
    union_at = r.target(fields[6])
    if r.table(union_at).get(0) != union_at + 4:    # Where every builder puts it, and the library reads it.
        raise ValueError("se00: the values vector is not the values table's first field")
    values = r.array(union_at + 4, dtype)
    value_ts = r.array(fields[7], _INT64) if 7 in fields else None
    return Response(name=name, channel=scalars[1], timestamp_unix_ns=scalars[2],
                    sample_ts_delta=scalars[3], ts_location=scalars[4],
                    message_counter=scalars[8], values=values, value_ts=value_ts)

