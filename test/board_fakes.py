"""A board on loopback for the control client and the CLI: a scripted UDP responder, and a board
answering every query the CLI makes with fixed values (tests of ctl, recv and the publisher)."""

import socket
import threading

from ethdaq.wire import protocol


class ScriptedBoard:
    """Answers the requests it gets with script[i](request) (None: no answer); records them.
    It waits for each request until close(), however long a loaded machine takes to start the
    program that sends it."""

    def __init__(self, script, addr=("127.0.0.1", 0)):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(addr)
        self.sock.settimeout(600)
        self.port = self.sock.getsockname()[1]
        self.script, self.seen = list(script), []
        self.closing = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        for answer in self.script:
            try:
                req, src = self.sock.recvfrom(2048)
            except socket.timeout:
                return
            if self.closing:
                return
            self.seen.append(req)
            rsp = answer(req)
            if rsp is not None:
                self.sock.sendto(rsp, src)

    def close(self):
        """Stop waiting: a datagram of our own wakes the thread if it still waits for a request."""
        self.closing = True
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as wake:
            wake.sendto(b"", self.sock.getsockname())
        self.thread.join(10)
        self.sock.close()


def seq_of(req):
    return protocol.HEADER.unpack_from(req)[3]


def config_answer(req):
    _, _, _, seq = protocol.HEADER.unpack_from(req)
    mask, *values = protocol.CONFIG_SET.unpack_from(req, protocol.HEADER.size)
    return protocol.pack_header(protocol.MSG_CONFIG_SET | protocol.RESPONSE, seq) + protocol.CONFIG.pack(*values)


IDENTITY = protocol.Identity(mac=bytes.fromhex("10e2d5000001"), ip=0x7F000001, ctl_port=7000, sys_clk_hz=125_000_000,
                            eth_dw=8, nchannels=4, sample_bits=16, max_payload=8954,
                            capabilities=protocol.CAP_STREAMER, board="sim", build_id="0123", ident="test")


def identify_answer(req):
    assert req[3] == protocol.MSG_IDENTIFY
    return protocol.pack_identify_response(seq_of(req), IDENTITY)


def fake_board(requests, link_speed=1000, emulator_mode=1, emulator_rate=2**30, payload=1472, enable=0xF,
               start_error=None, running=0, run=0, ptp=False, start_refusal=None, ident=IDENTITY,
               addr=("127.0.0.1", 0)):
    """A board on loopback answering IDENTIFY (`ident`), CONFIG_GET, STATUS (run `run`), EMULATOR,
    STREAM_START (run 7), STREAM_STOP (run 7), CLAIM (granted), RELEASE and, if `ptp`, PTP_STATUS
    (every field 0). start_error refuses STREAM_START with that code, and with the reason
    start_refusal (a protocol.Refusal) if given. It listens on `addr`."""
    config = [0, bytes(6), 0, 5000, payload, enable, 0, 0, bytes(6), 0, emulator_mode, emulator_rate, 1,
              0, 0, 0, 0, 1, 0, 128, 128, 0xFFFFFF00, 0]
    status = [0] * len(protocol.struct_codes(protocol.STATUS_RSP))
    status[10], status[9], status[22], status[0], status[1] = bytes(6), protocol.DST_VALID, link_speed, running, run
    codes = protocol.struct_codes(protocol.PTP_STATUS_RSP)
    ptp_status = [bytes(int(c[:-1])) if c.endswith("s") else 0 for c in codes]

    def answer(req):
        kind, seq = req[3], seq_of(req)
        head = protocol.pack_header(kind | protocol.RESPONSE, seq)
        if kind == protocol.MSG_IDENTIFY:
            return protocol.pack_identify_response(seq, ident)
        if kind == protocol.MSG_CONFIG_GET:
            return head + protocol.CONFIG.pack(*config)
        if kind == protocol.MSG_STATUS:
            return head + protocol.STATUS_RSP.pack(*status)
        if kind == protocol.MSG_PTP_STATUS and ptp:
            return head + protocol.PTP_STATUS_RSP.pack(*ptp_status)
        if kind == protocol.MSG_STREAM_START and start_error:
            return protocol.pack_error_response(seq, start_error, start_refusal)
        if kind == protocol.MSG_STREAM_START:
            return head + protocol.STREAM_START_RSP.pack(7, 0x7F000001)
        if kind == protocol.MSG_STREAM_STOP:
            return head + protocol.STREAM_STOP_RSP.pack(7)
        if kind == protocol.MSG_CLAIM:
            return head + protocol.CLAIM_RSP.pack(1, 0x7F000001, 60_000)
        return head
    return ScriptedBoard([answer] * requests, addr)
