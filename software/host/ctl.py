#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Control client: talks to a board's control port (see ethdaq.host.protocol)."""

import os
import socket

from ethdaq.host import protocol


class ControlTimeout(TimeoutError):
    pass


class ControlClient:
    def __init__(self, ip, port=7000, timeout=2.0, retries=3):
        self.addr    = (ip, port)
        self.timeout = timeout
        self.retries = retries
        self.sock    = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.settimeout(timeout)
        self.seq     = int.from_bytes(os.urandom(4), "big")

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def request(self, payload_fn):
        """Send a request built by payload_fn(seq), retrying on timeout; return the parsed
        response (msg_type, seq, body). Responses with another sequence number are skipped."""
        for _ in range(self.retries):
            self.seq = (self.seq + 1) & 0xffffffff
            self.sock.sendto(payload_fn(self.seq), self.addr)
            try:
                while True:
                    data, src = self.sock.recvfrom(2048)
                    if src != self.addr:
                        continue
                    try:
                        return protocol.parse_response(data, expect_seq=self.seq)
                    except protocol.ProtocolError:
                        continue
            except (socket.timeout, ConnectionRefusedError):
                continue  # ICMP port unreachable counts as one failed try, like silence.
        raise ControlTimeout(f"no answer from {self.addr[0]}:{self.addr[1]} after "
                             f"{self.retries} tries of {self.timeout:g} s")

    def identify(self):
        msg_type, _, body = self.request(protocol.identify_request)
        if msg_type != protocol.MSG_IDENTIFY_RSP:
            raise protocol.ProtocolError(f"identify answered with error code {body}")
        return body
