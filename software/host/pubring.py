#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""The ring that carries received Batches from the receive loop to the publishing process: the
Batches' bytes in shared memory (an anonymous memory file, passed to the other process as a file
descriptor: no name to clean up, freed when both have closed it), an index of records in a pipe.

    ring = RingWriter(size_bytes, max_datagrams)            # the receive loop's side
    ring.put(len(batch), batch.packets, batch.payload)      # False: no room, nothing written
    reader = RingReader(ring.memory, ring.size, ring.index) # the publishing process's side (fds)
    kind, record, datagrams, end = reader.next(timeout)      # KIND_DATA: a Batch, KIND_CONTROL: bytes
    reader.release(end, datagrams)                          # its room is free again

The writer never waits: a record that does not fit in the ring (bytes or datagrams) or in the
pipe is refused whole. A data record is a Batch's packet records followed by its payload; a
control record is bytes of the caller's (JSON). Each index entry (INDEX: where the record starts,
counted in bytes since the ring was made, its length and its datagrams, 0 for control records)
is one write of less than PIPE_BUF bytes, so it arrives whole or not at all, and the pipe's
system calls order the record's bytes before its entry. The reader frees room by storing, in
the ring's header, how far it has consumed (bytes and datagrams); the writer reads those two
counters to know what is free. The pipe's end of file tells the reader that the writer's process
has gone, whichever way it ended.
"""

import fcntl
import mmap
import os
import select
import struct

import numpy as np

from ethdaq.host.batch import PACKET_DTYPE, Batch

INDEX = struct.Struct("<QII")    # start (bytes since the ring began), length, datagrams (0: control)
HEADER_BYTES = 64                # u64 slots: consumed bytes, consumed datagrams, close deadline (ns)
ALIGN = 8
PIPE_BYTES = 1 << 20             # The index pipe's capacity asked for (Linux F_SETPIPE_SZ).
KIND_DATA, KIND_CONTROL, KIND_EOF = "data", "control", "eof"
_CONSUMED, _DONE, _DEADLINE = 0, 1, 2
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)


def _map(fd, size):
    """The memory file `fd` mapped: (mmap, header slots, data bytes)."""
    m = mmap.mmap(fd, HEADER_BYTES + size)
    return m, np.ndarray(HEADER_BYTES // 8, np.uint64, buffer=m), np.ndarray(size, np.uint8, buffer=m,
                                                                               offset=HEADER_BYTES)


def _unmap(m):
    try:
        m.close()
    except BufferError:
        pass                     # A Batch still views it: the mapping goes with the process.


class RingWriter:
    """The receive loop's side: `size` bytes of shared memory, at most `max_datagrams` datagrams
    in it. `memory` (the memory file) and `index` (the pipe's read end) are the file
    descriptors for the reader's process; close_reader_fds() once that process holds them."""

    def __init__(self, size, max_datagrams):
        self.size = -(-int(size) // ALIGN) * ALIGN
        self.max_datagrams = max_datagrams
        self.memory = os.memfd_create("ethdaq-publish-ring", os.MFD_CLOEXEC)
        os.ftruncate(self.memory, HEADER_BYTES + self.size)
        self._mm, self._head, self._data = _map(self.memory, self.size)
        self.index, self._w = os.pipe()
        try:
            fcntl.fcntl(self._w, _F_SETPIPE_SZ, PIPE_BYTES)
        except OSError:
            pass                 # The system's default capacity: fewer records in flight.
        os.set_blocking(self._w, False)
        self._written = 0        # Bytes since the ring began, skipped ends included.
        self._datagrams = 0      # Datagrams written.

    def in_flight(self):
        """Datagrams written and not yet released by the reader."""
        return self._datagrams - int(self._head[_DONE])

    def put(self, datagrams, *parts):
        """One record of `parts` (numpy arrays, copied as bytes) holding `datagrams` datagrams (0:
        a control record); False, nothing written, when the ring or the index has no room."""
        parts = [np.ascontiguousarray(p).reshape(-1).view(np.uint8) for p in parts]
        length = sum(len(p) for p in parts)
        room = -(-length // ALIGN) * ALIGN
        if self._datagrams + datagrams - int(self._head[_DONE]) > self.max_datagrams:
            return False
        pos = self._written % self.size
        skip = self.size - pos if pos + room > self.size else 0
        if self._written + skip + room - int(self._head[_CONSUMED]) > self.size:
            return False
        start = self._written + skip
        at = start % self.size
        for p in parts:
            self._data[at:at + len(p)] = p
            at += len(p)
        try:
            os.write(self._w, INDEX.pack(start, length, datagrams))
        except BlockingIOError:
            return False
        self._written = start + room
        self._datagrams += datagrams
        return True

    def set_deadline(self, monotonic_ns):
        """Tells the reader when to stop publishing what is left (time.monotonic_ns())."""
        self._head[_DEADLINE] = monotonic_ns

    def close_index(self):
        """End of file for the reader once it has read every entry."""
        if self._w is not None:
            os.close(self._w)
            self._w = None

    def close_reader_fds(self):
        """Closes this process's copies of the reader's file descriptors."""
        for fd in (self.memory, self.index):
            if fd is not None:
                os.close(fd)
        self.memory = self.index = None

    def close(self):
        self.close_index()
        self.close_reader_fds()
        if self._mm is not None:
            self._head = self._data = None
            _unmap(self._mm)
            self._mm = None


class RingReader:
    """The publishing process's side of a RingWriter's ring: the memory file `memory` of `size`
    bytes and the index pipe's read end `index` (file descriptors, closed by close())."""

    def __init__(self, memory, size, index):
        self.size = size
        self._mm, self._head, self._data = _map(memory, size)
        os.close(memory)
        self._fd = index
        self._pending = bytearray()

    def deadline_ns(self):
        """The writer's close deadline (time.monotonic_ns()), 0 before it closes."""
        return int(self._head[_DEADLINE])

    def next(self, timeout):
        """(KIND_DATA, Batch, datagrams, end), (KIND_CONTROL, bytes, 0, end), (KIND_EOF, None, 0,
        0) once the writer has gone and every entry is read, or None after `timeout` seconds."""
        if len(self._pending) < INDEX.size:
            ready, _, _ = select.select([self._fd], [], [], timeout)
            if not ready:
                return None
            chunk = os.read(self._fd, 1 << 16)
            if not chunk:
                return (KIND_EOF, None, 0, 0)
            self._pending += chunk
            if len(self._pending) < INDEX.size:
                return None
        start, length, datagrams = INDEX.unpack_from(self._pending)
        del self._pending[:INDEX.size]
        at = start % self.size
        raw = self._data[at:at + length]
        end = start + -(-length // ALIGN) * ALIGN
        if not datagrams:
            return (KIND_CONTROL, raw.tobytes(), 0, end)
        cut = datagrams * PACKET_DTYPE.itemsize
        return (KIND_DATA, Batch(raw[:cut].view(PACKET_DTYPE), raw[cut:]), datagrams, end)

    def release(self, end, datagrams):
        """The records up to `end` are consumed: their room is free for the writer."""
        self._head[_DONE] += datagrams
        self._head[_CONSUMED] = end

    def close(self):
        self._head = self._data = None
        _unmap(self._mm)
        os.close(self._fd)
