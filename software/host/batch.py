#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Received DAQ datagrams as numpy arrays: the one interface between the receive core (live,
ethdaq.host.rxcore), the HDF5 files (ethdaq.host.h5file) and users.

A `Batch` holds the datagrams that brought new data (first arrivals and late ones that filled a
gap; never duplicates or malformed datagrams, which are only counted):

- `packets`: one PACKET_DTYPE record per datagram, header fields already decoded to native
  integers, in arrival order;
- `payload`: uint8 array holding every datagram's samples back to back, still big-endian as on
  the wire; packet i's samples are payload[offset[i]:offset[i] + sample_count[i] * sample_bits[i] // 8].

Use `Batch.samples(i)` or `Batch.stream_samples(key)` to get samples as native integers.
A stream is identified by its source (IPv4 address and UDP port) and its stream_id: `stream_key()`.
"""

import ipaddress
from typing import NamedTuple

import numpy as np

PACKET_DTYPE = np.dtype([
    ("src_ip",       "<u4"),   # Source IPv4 address as an integer (ipaddress.IPv4Address(int)).
    ("src_port",     "<u2"),   # Source UDP port.
    ("stream_id",    "<u2"),
    ("flags",        "<u2"),   # daqformat.FLAG_* bits.
    ("sample_bits",  "u1"),
    ("late",         "u1"),    # 1: arrived after a higher seq and filled its gap.
    ("run",          "<u4"),
    ("sample_count", "<u4"),
    ("seq",          "<u8"),
    ("timestamp",    "<u8"),   # ns, PTP time if flags & FLAG_TS_PTP.
    ("dropped",      "<u8"),   # Cumulative samples the board dropped for this stream in this run.
    ("rx_time_ns",   "<u8"),   # Host time, CLOCK_REALTIME ns: when the receive call read it (one
                               # value per recvmmsg call), or the kernel's arrival timestamp with
                               # RxCore(kernel_timestamps=True) / ethdaq recv --kernel-timestamps.
    ("offset",       "<u8"),   # Byte offset of this datagram's samples in Batch.payload.
])

StreamKey = tuple  # (src_ip: int, src_port: int, stream_id: int)


def stream_key(src_ip, src_port, stream_id):
    return (int(src_ip), int(src_port), int(stream_id))


def stream_name(key):
    """Printable and HDF5-group-safe name of a stream: '192.168.1.50_5001_s0'."""
    src_ip, src_port, stream_id = key
    return f"{ipaddress.IPv4Address(src_ip)}_{src_port}_s{stream_id}"


def sample_dtype(sample_bits):
    """numpy dtype of one sample on the wire (big-endian), or None if it has none (24 bits...)."""
    if sample_bits in (8, 16, 32, 64):
        return np.dtype(f">u{sample_bits // 8}")
    return None


def decode_samples(raw, sample_bits):
    """Big-endian sample bytes -> native unsigned integers (uint8/16/32/64; 24, 40, ... bits
    widen to the next size)."""
    raw = np.asarray(raw, dtype=np.uint8)
    nbytes = sample_bits // 8
    if sample_bits <= 0 or sample_bits % 8 or sample_bits > 64:
        raise ValueError(f"sample_bits must be a multiple of 8 in 8..64, not {sample_bits}")
    if raw.size % nbytes:
        raise ValueError(f"{raw.size} bytes is not a whole number of {sample_bits}-bit samples")
    dt = sample_dtype(sample_bits)
    if dt is not None:
        return raw.view(dt).astype(dt.newbyteorder("="))
    width = 1 << (nbytes - 1).bit_length()  # 3 -> 4, 5..7 -> 8 bytes
    out = np.zeros((raw.size // nbytes, width), dtype=np.uint8)
    out[:, width - nbytes:] = raw.reshape(-1, nbytes)
    return out.reshape(-1).view(f">u{width}").astype(f"=u{width}")


class Batch(NamedTuple):
    packets: np.ndarray   # PACKET_DTYPE records
    payload: np.ndarray   # uint8

    def __len__(self):
        return len(self.packets)

    def raw(self, i):
        p = self.packets[i]
        start = int(p["offset"])
        return self.payload[start:start + int(p["sample_count"]) * (int(p["sample_bits"]) // 8)]

    def samples(self, i):
        """Samples of packet i as native unsigned integers."""
        return decode_samples(self.raw(i), int(self.packets[i]["sample_bits"]))

    def keys(self):
        """Stream keys present in this batch, in first-seen order."""
        if len(self.packets) == 0:
            return []
        keys = np.empty(len(self.packets), dtype=[("src_ip", "<u4"), ("src_port", "<u2"), ("stream_id", "<u2")])
        for name in keys.dtype.names:
            keys[name] = self.packets[name]
        unique, first = np.unique(keys, return_index=True)
        return [stream_key(*unique[i]) for i in np.argsort(first)]

    def select(self, key):
        """Indices of the packets of one stream."""
        src_ip, src_port, stream_id = key
        p = self.packets
        return np.flatnonzero((p["src_ip"] == src_ip) & (p["src_port"] == src_port) &
                              (p["stream_id"] == stream_id))

    def stream_samples(self, key):
        """All samples of one stream in this batch, in packet order, as native integers."""
        idx = self.select(key)
        if len(idx) == 0:
            return np.zeros(0, dtype=np.uint8)
        bits = int(self.packets[idx[0]]["sample_bits"])
        return np.concatenate([decode_samples(self.raw(i), bits) for i in idx])

    @classmethod
    def empty(cls):
        return cls(np.zeros(0, dtype=PACKET_DTYPE), np.zeros(0, dtype=np.uint8))
