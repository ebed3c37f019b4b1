#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Control client: talks to a board's control port (see ethdaq.wire.protocol)."""

import ipaddress
import os
import socket
import time

from ethdaq.wire import protocol


class ControlTimeout(TimeoutError):
    pass


class ControlUnreachable(ControlTimeout):
    """Nothing can be sent to the board (no route to its address): handled as no answer."""


class ControlClient:
    def __init__(self, ip, port=protocol.DEFAULT_CTL_PORT, timeout=2.0, retries=3, bind=None, key=None):
        """bind: the local address to send from (the board tells controllers apart by address).
        key: the board's shared key (protocol.parse_key): every request is then signed."""
        self.key     = key
        self.counter = 0
        self.addr    = (ip, port)
        self.timeout = timeout
        self.retries = retries
        self.sock    = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        if bind is not None:
            self.sock.bind((bind, 0))
        self.sock.settimeout(timeout)
        self.seq     = int.from_bytes(os.urandom(4), "big")

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def request(self, payload_fn):
        """Send a request built by payload_fn(seq) and return the parsed response (msg_type, seq,
        body). On a timeout the same request goes again with the same seq, so if only the answer
        was lost the board answers from its reply cache instead of executing it twice. A board
        that calls the seq stale (it has a newer one from this address and port: another client
        had it before) has not executed it: the request goes again once with a new random seq.
        Responses with another sequence number, or from another address, are skipped."""
        self.seq = (self.seq + 1) & 0xffffffff
        self._payload_fn = payload_fn
        self._datagram = self._build(payload_fn)
        return self._exchange()

    def _exchange(self):
        """Send self._datagram (for self.seq) until answered; see request()."""
        renewed = False
        tries = 0
        datagram = self._datagram
        while tries < self.retries:
            tries += 1
            try:
                self.sock.sendto(datagram, self.addr)  # Byte for byte the same on a retry.
            except OSError as e:   # ENETUNREACH, EHOSTUNREACH: the PC has no way to the address.
                raise ControlUnreachable(
                    f"cannot send to {self.addr[0]}:{self.addr[1]}: {e.strerror} (does this PC have an address "
                    f"on the board's subnet? `ip addr`, `ip route get {self.addr[0]}`)") from None
            try:
                while True:
                    data, src = self.sock.recvfrom(2048)
                    if src != self.addr:
                        continue
                    try:
                        rsp = protocol.parse_response(data, expect_seq=self.seq)
                    except protocol.ProtocolError:
                        continue
                    break
            except (socket.timeout, ConnectionRefusedError):
                continue  # ICMP port unreachable counts as one failed try, like silence.
            if rsp[0] == protocol.MSG_ERROR_RSP and rsp[2] == protocol.ERR_STALE_SEQ and not renewed:
                renewed = True
                self.seq = int.from_bytes(os.urandom(4), "big")
                datagram = self._datagram = self._build(self._payload_fn)
                tries -= 1
                continue
            return rsp
        raise ControlTimeout(f"no answer from {self.addr[0]}:{self.addr[1]} after "
                             f"{self.retries} tries of {self.timeout:g} s")

    def _build(self, payload_fn):
        """The request for the current seq, signed with a new counter if there is a key: this
        host's clock in ns, so several hosts sharing a key (with clocks in step) keep the board's
        rule that each counter is larger than the last it accepted."""
        request = payload_fn(self.seq)
        if self.key is None:
            return request
        self.counter = max(time.time_ns(), self.counter + 1)
        return protocol.sign(request, self.key, self.counter)

    def _expect(self, payload_fn, msg_type):
        return self._check(self.request(payload_fn), msg_type)

    def _check(self, rsp, msg_type):
        got, _, body = rsp
        if got == protocol.MSG_ERROR_RSP:
            raise ControlRefused(body)
        if got != msg_type | protocol.RESPONSE:
            raise protocol.ProtocolError(f"response type must be 0x{msg_type | protocol.RESPONSE:02X}, not 0x{got:02X}")
        return body

    def identify(self):
        return self._expect(protocol.identify_request, protocol.MSG_IDENTIFY)

    def stream_start(self, dst_ip=0, dst_port=5000, payload=1472, enable=None, backpressure=0, gap=0,
                     dst_mac=None, flush=protocol.FLUSH_DEFAULT_NS):
        """Start a run; dst_ip 0 means this host's address as the board sees it; dst_mac None means
        the board resolves it by ARP; enable None means every channel the board has (a mask with
        channels it does not have is refused); flush in ns (0: partial datagrams leave only at
        stop). Returns (run, dst_ip)."""
        if enable is None:
            enable = (1 << self.identify().nchannels) - 1
        mac = b"\0"*6 if dst_mac is None else protocol.parse_mac(dst_mac)
        return self._expect(lambda seq: protocol.stream_start_request(seq, dst_ip, dst_port, payload,
            enable, backpressure, gap, mac, flush), protocol.MSG_STREAM_START)

    def wait_destination(self, timeout=5.0, interval=0.05):
        """Poll STATUS until the board knows the stream destination's MAC or gives up on it.
        Returns the last Status; its dst_flags say which (DST_VALID or DST_UNREACHABLE)."""
        deadline = time.monotonic() + timeout
        while True:
            st = self.status()
            if st.dst_flags & (protocol.DST_VALID | protocol.DST_UNREACHABLE) or time.monotonic() > deadline:
                return st
            time.sleep(interval)

    def stream_stop(self):
        return self._expect(protocol.stream_stop_request, protocol.MSG_STREAM_STOP)[0]

    def emulator(self, mode, rate, seed=1):
        if isinstance(mode, str):
            if mode not in protocol.EMULATOR_MODES:
                raise ValueError(f"emulator mode must be one of {', '.join(protocol.EMULATOR_MODES)}, not {mode!r}")
            mode = protocol.EMULATOR_MODES[mode]
        return self._expect(lambda seq: protocol.emulator_request(seq, mode, rate, seed), protocol.MSG_EMULATOR)

    def status(self):
        return self._expect(protocol.status_request, protocol.MSG_STATUS)

    def streams(self):
        """This run's counters of each stream: a protocol.Streams."""
        return self._expect(protocol.streams_request, protocol.MSG_STREAMS)

    def streams_if_any(self):
        """streams(), or None from a build without a streamer (it refuses STREAMS as unsupported)."""
        try:
            return self.streams()
        except ControlRefused as e:
            if e.code != protocol.ERR_UNSUPPORTED:
                raise
            return None

    def ptp_status(self):
        """The board's PTP port: a protocol.PtpStatus."""
        return self._expect(protocol.ptp_status_request, protocol.MSG_PTP_STATUS)

    def launch(self, frame, at=None, after_ns=None, period_ns=0, count=1, guard=0):
        """Arm the time-triggered launcher (boards with protocol.CAP_LAUNCHER): `frame`, the Ethernet
        frame from its destination MAC to the end of its payload (the board adds padding, FCS and
        preamble), leaves with its first preamble byte on the PHY's pins when the board's PTP clock
        reads `at` = (sec, ns), or `after_ns` after the board reads the request; then every
        `period_ns`, `count` times in all (0: until stopped). `guard`: cycles before each launch in
        which other traffic starts no frame (0: the board's default). Returns a
        protocol.LaunchStatus; its first_sec/first_ns say when the first launch is."""
        if (at is None) == (after_ns is None):
            raise ValueError("give the launch time either as at=(sec, ns) or as after_ns")
        sec, ns = at if at is not None else divmod(int(after_ns), protocol.NS_PER_S)
        return self._expect(lambda seq: protocol.launch_request(seq, protocol.LAUNCH_ARM, bytes(frame), sec, ns,
                                                                period_ns, count, guard, relative=at is None),
                            protocol.MSG_LAUNCH)

    def launch_stop(self):
        """Disarm the launcher; returns its protocol.LaunchStatus (counters kept)."""
        return self._expect(lambda seq: protocol.launch_request(seq, protocol.LAUNCH_STOP), protocol.MSG_LAUNCH)

    def launch_status(self):
        """The launcher's protocol.LaunchStatus: armed, launches sent and missed (read-only)."""
        return self._expect(lambda seq: protocol.launch_request(seq, protocol.LAUNCH_QUERY), protocol.MSG_LAUNCH)

    def probe(self):
        """The latency probes (boards with protocol.CAP_PROBES): a protocol.ProbeReport."""
        return self._expect(protocol.probe_request, protocol.MSG_PROBE)

    def probe_clear(self):
        """Empty the latency probes (the controller's): statistics from now on."""
        self._expect(protocol.probe_clear_request, protocol.MSG_PROBE_CLEAR)

    def rules(self):
        """The receive classifier's rules and counters (boards with protocol.CAP_RULES): a protocol.Rules."""
        return self._expect(protocol.rules_request, protocol.MSG_RULES)

    def rule_set(self, index, enable=1, action="cpu", match=0, ethertype=0, proto=0, port=0, src_ip=0):
        """Write receive rule `index` (the controller's); `action` a name of protocol.RULE_ACTIONS or
        its number. Returns the protocol.Rule as set."""
        action = protocol.RULE_ACTIONS[action] if isinstance(action, str) else action
        return self._expect(lambda seq: protocol.rule_set_request(seq, index, enable, action, match, ethertype,
                                                                  proto, port, src_ip), protocol.MSG_RULE_SET)

    def reg_read(self, offset, count=1):
        """`count` 32-bit words of the front-end's registers from byte `offset` (boards with
        protocol.CAP_FRONTEND): a list of ints."""
        return self._expect(lambda seq: protocol.reg_read_request(seq, offset, count), protocol.MSG_REG_READ).words

    def reg_write(self, offset, words):
        """Write 32-bit words to the front-end's registers from byte `offset` (the controller's);
        returns the words read back."""
        return self._expect(lambda seq: protocol.reg_write_request(seq, offset, words), protocol.MSG_REG_WRITE).words

    def rx_stats(self):
        """The board's receive counters (anybody's): a protocol.RxStats, {name: frames} in code
        order, only those its build has (protocol.RX_COUNTERS says what each counts)."""
        return self._expect(protocol.rx_stats_request, protocol.MSG_RX_STATS)

    def claim(self, lease_s=0):
        """Ask to be the board's controller for lease_s seconds (0: the board's default). Returns
        (granted, controller IPv4 as int, lease milliseconds left); not granted: another address
        holds the board, and the result says which and for how long."""
        granted, holder, left = self._expect(lambda seq: protocol.claim_request(seq, lease_s), protocol.MSG_CLAIM)
        return bool(granted), holder, left

    def release(self):
        """Give up control of the board (no error if nobody held it)."""
        self._expect(protocol.release_request, protocol.MSG_RELEASE)

    def config(self):
        """The board's settings: a protocol.Config."""
        return self._expect(protocol.config_get_request, protocol.MSG_CONFIG_GET)

    def config_set(self, **fields):
        """Change some of the board's settings (protocol.CONFIG_FIELDS names; all are checked before
        any is applied). Returns the Config after the change.

        A new `ip` (int or dotted text) moves this client to it: the board answers from its old
        address, then switches. If no answer comes from the old address, the board may have
        switched with the answer lost, so the same request (same seq, same signature) goes to
        the new address, where the board answers it from its reply cache without running it
        again."""
        if "ip" in fields and isinstance(fields["ip"], str):
            fields["ip"] = int(ipaddress.IPv4Address(fields["ip"]))
        request = lambda seq: protocol.config_set_request(seq, **fields)
        if "ip" not in fields:
            return self._expect(request, protocol.MSG_CONFIG_SET)
        new_addr = (str(ipaddress.IPv4Address(fields["ip"])), self.addr[1])
        try:
            rsp = self.request(request)
        except ControlTimeout:
            old_addr, self.addr = self.addr, new_addr
            try:
                rsp = self._exchange()
            except ControlTimeout:
                self.addr = old_addr
                raise ControlTimeout(f"no answer from {old_addr[0]}:{old_addr[1]}, nor from the new address "
                                     f"{new_addr[0]}, after {self.retries} tries of {self.timeout:g} s each") from None
        body = self._check(rsp, protocol.MSG_CONFIG_SET)
        self.addr = new_addr
        return body

    def reboot(self, wait=30.0, interval=0.2):
        """Reboot the board (it resets every core; docs/protocol.md REBOOT) and, unless wait is
        None, wait up to `wait` seconds until it answers again. Returns (rebooted, status):
        rebooted False when the board had rebooted already since the boot count this asked
        about (a retry of ours, or another's REBOOT); status is the Status after the reboot (or,
        with wait None, the one before it)."""
        before = self.status()
        rebooting, boots = self._expect(lambda seq: protocol.reboot_request(seq, before.boots), protocol.MSG_REBOOT)
        if wait is None:
            return bool(rebooting), before
        deadline = time.monotonic() + wait
        while True:
            try:
                st = self.status()
                if st.boots != before.boots:
                    return bool(rebooting), st
            except ControlTimeout:
                pass
            if time.monotonic() > deadline:
                raise ControlTimeout(f"{self.addr[0]} did not answer within {wait:g} s of its reboot")
            time.sleep(interval)


def discover(broadcast="255.255.255.255", port=protocol.DEFAULT_CTL_PORT, timeout=1.0, tries=3, bind=None):
    """Boards that answer IDENTIFY sent to `broadcast` (the limited broadcast, or a subnet's
    directed one such as 192.168.1.255; a board takes both, and no other request there:
    docs/protocol.md). The request goes `tries` times, `timeout / tries` apart, as a datagram to a
    broadcast can be lost like any other; every answer until `timeout` counts, once per board.
    Returns [(address it answered from, protocol.Identity)] in address order."""
    seq = int.from_bytes(os.urandom(4), "big")
    request = protocol.identify_request(seq)
    found = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
        if bind is not None:
            sock.bind((bind, 0))
        start = time.monotonic()
        for i in range(tries):
            sock.sendto(request, (broadcast, port))
            until = start + timeout * (i + 1) / tries
            while (left := until - time.monotonic()) > 0:
                sock.settimeout(left)
                try:
                    data, src = sock.recvfrom(2048)
                except (socket.timeout, ConnectionRefusedError):
                    break
                try:
                    msg_type, _, ident = protocol.parse_response(data, expect_seq=seq)
                except protocol.ProtocolError:
                    continue
                if msg_type == protocol.MSG_IDENTIFY_RSP:
                    found.setdefault((src[0], ident.mac), ident)
    return sorted(((ip, ident) for (ip, _), ident in found.items()),
                  key=lambda item: (ipaddress.IPv4Address(item[0]), item[1].mac))


class ControlRefused(RuntimeError):
    """The board's ERROR_RSP: code, and refusal (a protocol.Refusal: the field, the value and its
    range) when the board said why."""

    def __init__(self, code):
        body = code if isinstance(code, protocol.ErrorCode) else protocol.ErrorCode(code)
        self.code = int(body)
        self.refusal = body.refusal
        super().__init__(f"board refused the request: {body.describe()}")
