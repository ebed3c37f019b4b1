#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""CPU ports: let the firmware send and receive datagrams on one UDP port of the hardware
LiteEth UDP/IP stack (``CPUUDPPort``), or raw Ethernet frames of one EtherType on LiteEth's MAC
crossbar (``CPUMACPort``, for PTP over Ethernet).

The hardware stack answers ARP and ICMP and carries bulk data without the CPU; the CPU only
needs its control port. Instead of a second MAC and a software IP stack, the firmware gets a
datagram mailbox on the hardware UDP crossbar:

- RX: whole datagrams are admitted only when the buffer can hold them, so a datagram is either
  stored completely or dropped and counted (``rx_dropped``); the UDP stack is never stalled.
- TX: the firmware writes the payload into a buffer, then ``tx_send`` streams the complete
  datagram, so the MAC never sees a pause inside a frame.

``CPUMACPort`` is the same mailbox for frames. A frame carries no length before it arrives, so it
is admitted only when the buffer can hold ``rx_max`` bytes, and longer frames are stored truncated.
Both ports share the CPU side of the receive buffer and the whole transmit path.
"""

from migen import *

from litex.gen import *

from litex.soc.interconnect import stream
from litex.soc.interconnect.csr import *

from liteeth.common import eth_mac_description, eth_phy_description, eth_udp_user_description
from liteeth.mac.common import LiteEthLastHandler

from ethdaq.gateware.csr import CSRConfig

# Shared Paths -------------------------------------------------------------------------------------

# Both ports give the firmware the same buffer protocol. These helpers build it into the calling
# port under the port's own attribute names (rx_cpu_fsm, tx_data, tx_fsm), as if written inline.

def _add_rx_reader(port, rx_data, rx_meta, skip=None):
    """CPU side of a receive buffer: ``rx_next`` steps through the payload of the entry at the
    head of ``rx_meta`` (which has a ``length`` field), ``rx_consume`` discards the rest of it.

    ``skip`` (optional, a field of the head entry): entries that had to be stored before they
    could be judged (a frame's error shows only on its last byte) are discarded here, unseen
    by the CPU.
    """
    readable = rx_meta.source.valid
    if skip is not None:
        readable = readable & ~skip
    rx_read = Signal(16)
    port.rx_cpu_fsm = rx_cpu_fsm = FSM(reset_state="IDLE")
    rx_cpu_idle = [
        If(port._rx_next.re & readable & rx_data.source.valid & (rx_read < rx_meta.source.length),
            rx_data.source.ready.eq(1),
            NextValue(rx_read, rx_read + 1)
        ),
        If(port._rx_consume.re & readable,
            NextState("DRAIN")
        )
    ]
    if skip is not None:
        rx_cpu_idle.append(If(rx_meta.source.valid & skip, NextState("DRAIN")))
    rx_cpu_fsm.act("IDLE", *rx_cpu_idle)
    rx_cpu_fsm.act("DRAIN",
        If(rx_read < rx_meta.source.length,
            rx_data.source.ready.eq(1),
            If(rx_data.source.valid,
                NextValue(rx_read, rx_read + 1)
            )
        ).Else(
            rx_meta.source.ready.eq(1),
            NextValue(rx_read, 0),
            NextState("IDLE")
        )
    )


def _add_tx_path(port, source, tx_depth, header, max_length=None, in_flight=0, with_count=True):
    """Transmit buffer: ``tx_data`` appends a byte; ``tx_send`` streams the buffered payload as
    one packet on ``source`` (dw=8) without a pause inside it, or discards it and counts it in
    ``tx_dropped`` if it overflowed ``tx_depth``. Drives ``tx_busy``, ``tx_count`` and
    ``tx_dropped``.

    ``header(length)`` gives the statements that set the source's header fields while sending;
    ``length`` is the payload length in bytes. ``max_length`` (optional) makes longer payloads
    overflow even though the buffered FIFO holds one byte more than ``tx_depth`` (its output
    register); without it, payloads of up to tx_depth + 1 bytes are sent. ``in_flight``: beats
    still on their way after ``source`` (a buffer behind it) keep ``tx_busy`` set.
    ``with_count``: drive ``tx_count`` (packets sent); without it the port has no such CSR.
    """
    port.tx_data = tx_data = stream.SyncFIFO([("data", 8)], depth=tx_depth, buffered=True)
    tx_length   = Signal(16)
    tx_sent     = Signal(16)
    tx_overflow = Signal()
    tx_count    = Signal(32)
    tx_dropped  = Signal(32)
    tx_room     = tx_data.sink.ready
    if max_length is not None:
        tx_room = tx_room & (tx_length < max_length)

    port.tx_fsm = tx_fsm = FSM(reset_state="IDLE")
    tx_fsm.act("IDLE",
        tx_data.sink.data.eq(port._tx_data.storage),
        If(port._tx_data.re,
            If(tx_room,
                tx_data.sink.valid.eq(1),
                NextValue(tx_length, tx_length + 1)
            ).Else(
                NextValue(tx_overflow, 1)
            )
        ),
        If(port._tx_send.re,
            NextValue(tx_sent, 0),
            If(tx_overflow,
                NextValue(tx_dropped, tx_dropped + 1),
                NextState("FLUSH")
            ).Elif(tx_length != 0,
                NextState("SEND")
            )
        )
    )
    # tx_sent + 1 == tx_length, from the sum the counter steps to (one carry chain, not a second
    # one for tx_length - 1); 17 bits, so tx_length 0 never matches.
    tx_sent_next = Signal(17)
    port.comb += tx_sent_next.eq(tx_sent + 1)
    tx_fsm.act("SEND",
        source.valid.eq(tx_data.source.valid),
        source.data.eq(tx_data.source.data),
        source.last.eq(tx_sent_next == tx_length),
        source.last_be.eq(source.last),
        *header(tx_length),
        tx_data.source.ready.eq(source.ready),
        If(source.valid & source.ready,
            NextValue(tx_sent, tx_sent_next),
            If(source.last,
                NextValue(tx_length, 0),
                NextValue(tx_count, tx_count + 1) if with_count else [],
                NextState("IDLE")
            )
        )
    )
    tx_fsm.act("FLUSH",
        tx_data.source.ready.eq(1),
        If(~tx_data.source.valid,
            NextValue(tx_length,   0),
            NextValue(tx_overflow, 0),
            NextState("IDLE")
        )
    )
    port.comb += [
        port._tx_busy.status.eq(~tx_fsm.ongoing("IDLE") | in_flight),
        port._tx_count.status.eq(tx_count) if with_count else [],
        port._tx_dropped.status.eq(tx_dropped),
    ]


def _check_depths(**depths):
    for name, depth in depths.items():
        if depth < 64 or depth & (depth - 1):
            raise ValueError(f"{name} must be a power of two >= 64, not {depth!r}")

# CPU UDP Port -------------------------------------------------------------------------------------

class CPUUDPPort(LiteXModule):
    """Datagram mailbox between one LiteEth UDP user port (dw=8) and the CPU's CSR bus.

    Parameters
    ----------
    udp_port : int
        Local UDP port; the source port of transmitted datagrams unless tx_local_port says otherwise.
    extra_ports : tuple of int
        More local ports served by the same mailbox (connect_udp_ports() merges them): one buffer
        and one set of registers for several services (e.g. the control port and PTP's 319 and
        320), which on a small FPGA costs far fewer LUTs than a mailbox each. rx_local_port says
        which port a datagram came to; tx_local_port picks the port to send from.
    rx_depth : int
        Receive buffer in bytes (all stored datagrams together).
    rx_datagrams : int
        Maximum number of stored datagrams waiting for the CPU.
    tx_depth : int
        Largest datagram payload the CPU can send, in bytes.
    probe_stamp_bits : int
        For the latency probes (gateware/probe.py; 0: none): `probe_arrived` pulses when a
        datagram's header reaches the mailbox, which then takes `probe_stamp`/`probe_stamped` (the
        probe's stamp of its last byte on the wire) and keeps it with the datagram;
        `probe_seen` pulses when the CPU first reads rx_ready as 1 for it, with its stamp in
        `probe_seen_stamp`/`probe_seen_stamped`.
    with_counters : bool
        The CSRs rx_count, rx_errors and tx_count (datagrams accepted, discarded as flagged by the
        MAC, sent). Off in the SoC: the firmware does not read them, the MAC counts the frames
        with a bad FCS itself (eth_errors_fcs_errors, which the firmware shows), and the three
        32-bit counters and their read multiplexer cost about 270 LUT4 of the ECP5-25F. The
        drop counters rx_dropped and tx_dropped are always there.
    """
    def __init__(self, udp_port, rx_depth=2048, rx_datagrams=4, tx_depth=2048, extra_ports=(), probe_stamp_bits=0,
                 with_counters=True):
        ports = (udp_port, *extra_ports)
        for p in ports:
            if not (isinstance(p, int) and 0 < p < 65536):
                raise ValueError(f"udp_port must be in 1..65535, not {p!r}")
        if len(set(ports)) != len(ports):
            raise ValueError(f"UDP ports must be distinct, not {ports!r}")
        _check_depths(rx_depth=rx_depth, tx_depth=tx_depth)
        self.udp_port  = udp_port
        self.udp_ports = ports
        self.sink     = sink   = stream.Endpoint(eth_udp_user_description(8)) # From UDP crossbar.
        self.source   = source = stream.Endpoint(eth_udp_user_description(8)) # To UDP crossbar.
        # Latency probes (probe_stamp_bits).
        sb = max(probe_stamp_bits, 1)
        self.probe_arrived      = Signal()
        self.probe_stamp        = Signal(sb)
        self.probe_stamped      = Signal()
        self.probe_seen         = Signal()
        self.probe_seen_stamp   = Signal(sb)
        self.probe_seen_stamped = Signal()

        # RX CSRs.
        self._rx_ready     = CSRStatus(description="1 when a received datagram is waiting.")
        self._rx_ip        = CSRStatus(32, description="Source IPv4 address of the waiting datagram.")
        self._rx_port      = CSRStatus(16, description="Source UDP port of the waiting datagram.")
        self._rx_length    = CSRStatus(16, description="Stored payload bytes of the waiting datagram.")
        self._rx_truncated = CSRStatus(description="1 if the waiting datagram lost bytes (declared length above what arrived).")
        self._rx_data      = CSRStatus(8,  description="Current payload byte of the waiting datagram.")
        self._rx_next      = CSR()  # Write: advance to the next payload byte.
        self._rx_consume   = CSR()  # Write: discard the rest of the waiting datagram.
        if with_counters:
            self._rx_count = CSRStatus(32, description="Datagrams accepted.")
        self._rx_dropped   = CSRStatus(32, description="Datagrams dropped because the buffer was full or they were too large.")
        if with_counters:
            self._rx_errors = CSRStatus(32, description="Datagrams discarded because the MAC flagged them (bad FCS).")
        self._rx_local_port = CSRStatus(16, description="Local UDP port the waiting datagram was sent to.")

        # TX CSRs.
        self._tx_data      = CSRConfig(8,  description="Write: append one payload byte.")
        self._tx_ip        = CSRConfig(32, description="Destination IPv4 address.")
        self._tx_port      = CSRConfig(16, description="Destination UDP port.")
        self._tx_local_port = CSRConfig(16, reset=udp_port, description="Local (source) UDP port to send from: one of the mailbox's ports.")
        self._tx_send      = CSR()  # Write: send the appended payload as one datagram.
        self._tx_busy      = CSRStatus(description="1 while a datagram is being sent.")
        if with_counters:
            self._tx_count = CSRStatus(32, description="Datagrams sent.")
        self._tx_dropped   = CSRStatus(32, description="Datagrams discarded because the payload exceeded tx_depth.")

        # # #

        # RX Data-Path.
        # -------------
        rx_data, rx_meta, rx_dropped, rx_count, rx_errors = self._add_rx_path(rx_depth, rx_datagrams, probe_stamp_bits, with_counters)

        # RX Control-Path (CPU side).
        # ---------------------------
        _add_rx_reader(self, rx_data, rx_meta, skip=rx_meta.source.error)
        if probe_stamp_bits:
            # The CPU sees the datagram: its first read of rx_ready as 1 (the firmware polls).
            seen = Signal()
            self.sync += If(rx_meta.source.valid & rx_meta.source.ready, seen.eq(0)
                ).Elif(self.probe_seen, seen.eq(1))
            self.comb += [
                self.probe_seen.eq(self._rx_ready.we & self._rx_ready.status & ~seen),
                self.probe_seen_stamp.eq(rx_meta.source.stamp),
                self.probe_seen_stamped.eq(rx_meta.source.stamped),
            ]
        self.comb += [
            self._rx_ready.status.eq(rx_meta.source.valid & ~rx_meta.source.error & self.rx_cpu_fsm.ongoing("IDLE")),
            self._rx_ip.status.eq(rx_meta.source.ip),
            self._rx_port.status.eq(rx_meta.source.port),
            self._rx_local_port.status.eq(rx_meta.source.local_port),
            self._rx_length.status.eq(rx_meta.source.length),
            self._rx_truncated.status.eq(rx_meta.source.truncated),
            self._rx_data.status.eq(rx_data.source.data),
            self._rx_dropped.status.eq(rx_dropped),
        ]
        if with_counters:
            self.comb += [
                self._rx_count.status.eq(rx_count),
                self._rx_errors.status.eq(rx_errors),
            ]

        # TX Data-Path / Control-Path.
        # ----------------------------
        # Through a buffer with registered valid and ready: LiteEth's UDP/IP transmit path is
        # combinational in `ready` (through its ARP table lookup), which with this FSM behind
        # it would be the sys clock's worst path on ECP5.
        out = stream.Endpoint(eth_udp_user_description(8))
        self.tx_buffer = stream.Buffer(eth_udp_user_description(8), pipe_valid=True, pipe_ready=True)
        self.comb += [out.connect(self.tx_buffer.sink), self.tx_buffer.source.connect(source)]
        _add_tx_path(self, out, tx_depth, in_flight=self.tx_buffer.source.valid, with_count=with_counters, header=lambda length: [
            out.src_port.eq(self._tx_local_port.storage if extra_ports else udp_port),
            out.dst_port.eq(self._tx_port.storage),
            out.ip_address.eq(self._tx_ip.storage),
            out.length.eq(length),
        ])

    def _add_rx_path(self, rx_depth, rx_datagrams, probe_stamp_bits, with_counters):
        """Receive buffer and its admission: whole datagrams from `sink` into `rx_data`, their
        headers into `rx_meta`, or dropped and counted. Returns the two FIFOs and the counters."""
        sink = self.sink
        self.rx_data = rx_data = stream.SyncFIFO([("data", 8)], depth=rx_depth, buffered=True)
        sb = len(self.probe_stamp)
        self.rx_meta = rx_meta = stream.SyncFIFO(
            [("ip", 32), ("port", 16), ("local_port", 16), ("length", 16), ("truncated", 1), ("error", 1)] +
            ([("stamp", sb), ("stamped", 1)] if probe_stamp_bits else []),
            depth=rx_datagrams)
        rx_stamp   = Signal(sb)
        rx_stamped = Signal()

        rx_free    = Signal(max=rx_depth + 2)
        rx_stored  = Signal(16)
        rx_seen    = Signal(16)
        rx_length  = Signal(16)
        rx_ip      = Signal(32)
        rx_port    = Signal(16)
        rx_local   = Signal(16)
        rx_dropped = Signal(32)
        rx_count   = Signal(32)
        rx_bad     = Signal()    # The MAC flagged a beat of this datagram (bad FCS: on the last).
        rx_errors  = Signal(32)
        self.comb += rx_free.eq(rx_depth - rx_data.level)

        self.rx_fsm = rx_fsm = FSM(reset_state="IDLE")
        rx_fsm.act("IDLE",
            self.probe_arrived.eq(sink.valid),
            If(sink.valid,
                NextValue(rx_stamp, self.probe_stamp),
                NextValue(rx_stamped, self.probe_stamped),
                # Admission: the whole declared payload must fit, so a datagram is stored
                # completely or not at all.
                If(rx_meta.sink.ready & (sink.length <= rx_free),
                    NextValue(rx_stored, 0),
                    NextValue(rx_seen,   0),
                    NextValue(rx_length, sink.length),
                    NextValue(rx_ip,     sink.ip_address),
                    NextValue(rx_port,   sink.src_port),
                    NextValue(rx_local,  sink.dst_port),
                    NextValue(rx_bad,    0),
                    NextState("RECEIVE")
                ).Else(
                    NextValue(rx_dropped, rx_dropped + 1),
                    NextState("DROP")
                )
            )
        )
        rx_fsm.act("RECEIVE",
            sink.ready.eq(1),
            # Ethernet padding of short frames can follow the payload: store only the declared length.
            rx_data.sink.data.eq(sink.data),
            If(sink.valid,
                If(rx_seen < rx_length,
                    rx_data.sink.valid.eq(1),
                    If(rx_data.sink.ready,
                        NextValue(rx_stored, rx_stored + 1)
                    ),
                ),
                NextValue(rx_seen, rx_seen + 1),
                If(sink.error != 0,
                    NextValue(rx_bad, 1)
                ),
                If(sink.last,
                    NextState("COMMIT")
                )
            )
        )
        # A flagged datagram is stored like the others (its error shows on its last byte, after
        # the rest) and discarded unseen by the CPU when it reaches the head (rx_errors).
        rx_fsm.act("COMMIT",
            rx_meta.sink.valid.eq(1),
            rx_meta.sink.ip.eq(rx_ip),
            rx_meta.sink.port.eq(rx_port),
            rx_meta.sink.local_port.eq(rx_local),
            rx_meta.sink.length.eq(rx_stored),
            rx_meta.sink.truncated.eq(rx_stored != rx_length),
            rx_meta.sink.error.eq(rx_bad),
            *([rx_meta.sink.stamp.eq(rx_stamp), rx_meta.sink.stamped.eq(rx_stamped)] if probe_stamp_bits else []),
            If(rx_bad,
                NextValue(rx_errors, rx_errors + 1)
            ).Else(
                NextValue(rx_count, rx_count + 1)
            ) if with_counters else [],
            NextState("IDLE")
        )
        rx_fsm.act("DROP",
            sink.ready.eq(1),
            If(sink.valid & sink.last,
                NextState("IDLE")
            )
        )
        return rx_data, rx_meta, rx_dropped, rx_count, rx_errors


def hold_upconverter_params(converter):
    """Make a widening LiteX StrideConverter (`converter`, before it is finalized) take its
    parameters with each word it accepts, not in every cycle.

    LiteX 2024.12 registers them unconditionally (`source.param.eq(sink.param)` each cycle), so an
    output word that waits for `ready` takes on whatever its sink shows next: on LiteEth's UDP
    crossbar at eth_dw=64 the CPU port's 8-byte datagrams (one word: the control protocol's empty
    answers) left with the next datagram's or an idle FIFO's address, 0.0.0.0, for which LiteEth's
    ARP table asks forever while the mailbox waits (and the watchdog resets the board). Within a
    datagram the parameters do not change, so taking them with each accepted word is exact."""
    from migen.fhdl.structure import _Assign
    sink, source = converter.sink, converter.source
    targets = {id(s) for s in source.param.flatten()}
    sync = converter._fragment.sync.get("sys", [])
    found = [j for j, st in enumerate(sync) if isinstance(st, _Assign) and id(st.l) in targets]
    if len(found) != len(targets):
        raise ValueError(f"hold_upconverter_params: {len(found)} registers of the converter's {len(targets)} "
                         f"parameters found; LiteX no longer converts them this way")
    for j in found:
        sync[j] = If(sink.valid & sink.ready, sync[j])


def connect_udp_ports(crossbar, port):
    """Connect a CPUUDPPort to a LiteEth UDP crossbar on each of its ports (port.udp_ports).
    Returns the statements for the caller's comb.

    One crossbar user port carries them all: the crossbar dispatches datagrams for the extra
    ports to the same user as udp_port (the mailbox records each one's dst_port), and the
    mailbox's datagrams leave with the src_port the firmware chose (tx_local_port). A separate
    user port per number, merged by an arbiter, cost about 400 LUTs more in wide multiplexers."""
    user = crossbar.get_port(port.udp_port, dw=8)
    if crossbar.dw != 8:
        hold_upconverter_params(crossbar.tx_converter)
    extra = [n for n in port.udp_ports if n != port.udp_port]
    if extra:
        for n in extra:
            if n in crossbar.users:
                raise ValueError(f"UDP port {n} is already assigned on the crossbar")
        finalize = crossbar.do_finalize
        def do_finalize():
            finalize()
            index = list(crossbar.users.keys()).index(port.udp_port)
            dst = getattr(crossbar.master.sink, crossbar.dispatch_param)
            crossbar.comb += [If(dst == n, crossbar.dispatcher.sel.eq(2**index)) for n in extra]
        crossbar.do_finalize = do_finalize
    return [user.source.connect(port.sink), port.source.connect(user.sink)]


# CPU MAC Port -------------------------------------------------------------------------------------

class CPUMACPort(LiteXModule):
    """Frame mailbox between one LiteEth MAC crossbar user port (dw=8) and the CPU's CSR bus, for
    the raw Ethernet frames of one EtherType (PTP over Ethernet: 0x88F7).

    Connect it to ``ethcore.mac.crossbar.get_port(ethernet_type, dw=8)``; that needs a MAC with
    dw=8, as the MAC crossbar does not convert widths.

    The payload is what follows the EtherType, including the MAC's padding of short frames (the
    MAC strips the FCS but not the padding).

    RX never stalls the crossbar. A frame is admitted at its first byte if ``rx_max`` bytes and a
    frame slot are free, else dropped whole (``rx_dropped``, whatever its error flag). The MAC
    flags a bad FCS on the last byte only, so such a frame is stored, then discarded unseen when it
    reaches the head of the queue (``rx_errors``); until then it holds its buffer space.

    Parameters
    ----------
    ethernet_type : int
        EtherType received and transmitted (0x0600..0xFFFF).
    mac_address : int or Signal(48)
        Own unicast MAC address; source of transmitted frames (a Signal when it can change at
        run time: gateware/netaddr.py).
    rx_depth : int
        Receive buffer in bytes (all stored frames together).
    rx_frames : int
        Maximum number of stored frames waiting for the CPU.
    rx_max : int
        Payload bytes stored per frame; longer frames are stored truncated.
    tx_depth : int
        Largest frame payload the CPU can send, in bytes.
    """
    def __init__(self, ethernet_type, mac_address, rx_depth=256, rx_frames=4, rx_max=128, tx_depth=128):
        if not (0x0600 <= ethernet_type <= 0xFFFF):
            # Values below 0x0600 are IEEE 802.3 length fields, not EtherTypes.
            raise ValueError(f"ethernet_type must be in 0x0600..0xFFFF, not {ethernet_type!r}")
        if isinstance(mac_address, int) and (not (0 <= mac_address < 2**48) or (mac_address >> 40) & 1):
            raise ValueError(f"mac_address must be a 48-bit unicast address, not {mac_address!r}")
        _check_depths(rx_depth=rx_depth, tx_depth=tx_depth)
        if not (1 <= rx_max <= min(rx_depth, 65535)):
            raise ValueError(f"rx_max must be in 1..{min(rx_depth, 65535)} (at most rx_depth), not {rx_max!r}")
        if rx_frames < 1:
            raise ValueError(f"rx_frames must be >= 1, not {rx_frames!r}")
        self.ethernet_type = ethernet_type
        self.mac_address   = mac_address
        self.sink   = sink   = stream.Endpoint(eth_mac_description(8)) # From MAC crossbar.
        self.source = source = stream.Endpoint(eth_mac_description(8)) # To MAC crossbar.

        # RX CSRs.
        self._rx_ready     = CSRStatus(description="1 when a received frame is waiting.")
        self._rx_mac       = CSRStatus(48, description="Source MAC address of the waiting frame.")
        self._rx_dst       = CSRStatus(fields=[
            CSRField("multicast", size=1, description="1 if the waiting frame was sent to a group "
                "(multicast or broadcast) address: bit 0 of the destination's first byte."),
        ])
        self._rx_length    = CSRStatus(16, description="Stored payload bytes of the waiting frame (at most rx_max).")
        self._rx_truncated = CSRStatus(description="1 if the waiting frame lost the payload bytes beyond rx_max.")
        self._rx_data      = CSRStatus(8,  description="Current payload byte of the waiting frame.")
        self._rx_next      = CSR()  # Write: advance to the next payload byte.
        self._rx_consume   = CSR()  # Write: discard the rest of the waiting frame.
        self._rx_count     = CSRStatus(32, description="Frames accepted (truncated ones included).")
        self._rx_dropped   = CSRStatus(32, description="Frames dropped because the buffer had no room for rx_max bytes or no free frame slot.")
        self._rx_errors    = CSRStatus(32, description="Frames discarded because the MAC flagged them (error set, e.g. a bad FCS).")

        # TX CSRs.
        self._tx_data      = CSRConfig(8,  description="Write: append one payload byte.")
        self._tx_mac       = CSRConfig(48, description="Destination MAC address.")
        self._tx_send      = CSR()  # Write: send the appended payload as one frame.
        self._tx_busy      = CSRStatus(description="1 while a frame is being sent.")
        self._tx_count     = CSRStatus(32, description="Frames sent.")
        self._tx_dropped   = CSRStatus(32, description="Frames discarded because the payload exceeded tx_depth.")

        # # #

        # RX Data-Path.
        # -------------
        rx_data, rx_meta, rx_count, rx_dropped, rx_errors = self._add_rx_path(rx_depth, rx_frames, rx_max)

        # RX Control-Path (CPU side).
        # ---------------------------
        _add_rx_reader(self, rx_data, rx_meta, skip=rx_meta.source.error)
        self.comb += [
            self._rx_ready.status.eq(
                rx_meta.source.valid & ~rx_meta.source.error & self.rx_cpu_fsm.ongoing("IDLE")),
            self._rx_mac.status.eq(rx_meta.source.mac),
            self._rx_dst.fields.multicast.eq(rx_meta.source.multicast),
            self._rx_length.status.eq(rx_meta.source.length),
            self._rx_truncated.status.eq(rx_meta.source.truncated),
            self._rx_data.status.eq(rx_data.source.data),
            self._rx_count.status.eq(rx_count),
            self._rx_dropped.status.eq(rx_dropped),
            self._rx_errors.status.eq(rx_errors),
        ]

        # TX Data-Path / Control-Path.
        # ----------------------------
        # LiteEth's MAC pads short frames to the 60-byte minimum, so any payload length >= 1 works.
        _add_tx_path(self, source, tx_depth, max_length=tx_depth, header=lambda length: [
            source.target_mac.eq(self._tx_mac.storage),
            source.sender_mac.eq(mac_address),
            source.ethernet_type.eq(ethernet_type),
        ])

    def _add_rx_path(self, rx_depth, rx_frames, rx_max):
        """Receive buffer and its admission: frames from `sink` into `rx_data` (at most `rx_max`
        bytes each), their headers into `rx_meta`, or dropped whole and counted. Returns the two
        FIFOs and the counters."""
        sink = self.sink
        self.rx_data = rx_data = stream.SyncFIFO([("data", 8)], depth=rx_depth, buffered=True)
        self.rx_meta = rx_meta = stream.SyncFIFO(
            [("mac", 48), ("multicast", 1), ("length", 16), ("truncated", 1), ("error", 1)],
            depth=rx_frames)

        rx_free    = Signal(max=rx_depth + 1)
        rx_room    = Signal()              # Room to admit a frame starting now.
        rx_admit   = Signal()              # Current beat belongs to an admitted frame.
        rx_store   = Signal()              # Current beat's byte is stored.
        rx_stored  = Signal(max=rx_max + 1)
        rx_cut     = Signal()              # Earlier beats of the frame were beyond rx_max.
        rx_bad     = Signal()              # Earlier beats of the frame had error set.
        rx_error   = Signal()
        rx_count   = Signal(32)
        rx_dropped = Signal(32)
        rx_errors  = Signal(32)
        self.comb += [
            rx_free.eq(rx_depth - rx_data.level),
            # A frame's length is only known at its end: admit it only if rx_max bytes fit. The
            # meta FIFO only fills from here, so a slot free at the first beat is still free at
            # the last, and the data FIFO cannot overflow while at most rx_max bytes are stored.
            rx_room.eq(rx_meta.sink.ready & (rx_free >= rx_max)),
            # Never stall the crossbar: frames we cannot take are dropped instead.
            sink.ready.eq(1),
            rx_store.eq(sink.valid & rx_admit & (rx_stored < rx_max)),
            rx_data.sink.valid.eq(rx_store),
            rx_data.sink.data.eq(sink.data),
            rx_error.eq(rx_bad | (sink.error != 0)),
            # The entry is written with the last beat, so one-beat frames and back-to-back frames
            # need no extra cycle. The MAC header fields are payload fields of
            # eth_mac_description: they come with every beat, the last one included.
            rx_meta.sink.valid.eq(sink.valid & sink.last & rx_admit),
            rx_meta.sink.mac.eq(sink.sender_mac),
            rx_meta.sink.multicast.eq(sink.target_mac[40]), # Bit 0 of the first byte on the wire.
            rx_meta.sink.length.eq(rx_stored + rx_store),
            rx_meta.sink.truncated.eq(rx_cut | ~rx_store),
            # The MAC's FCS check flags error on the last beat only, after the bytes are stored:
            # such entries are committed flagged and discarded by the CPU side unseen.
            rx_meta.sink.error.eq(rx_error),
        ]
        self.sync += [
            If(sink.valid & rx_admit,
                If(sink.last,
                    rx_stored.eq(0),
                    rx_cut.eq(0),
                    rx_bad.eq(0),
                    If(rx_error,
                        rx_errors.eq(rx_errors + 1)
                    ).Else(
                        rx_count.eq(rx_count + 1)
                    )
                ).Else(
                    rx_stored.eq(rx_stored + rx_store),
                    rx_cut.eq(rx_cut | ~rx_store),
                    rx_bad.eq(rx_error),
                )
            )
        ]

        self.rx_fsm = rx_fsm = FSM(reset_state="IDLE")
        rx_fsm.act("IDLE",
            # The first beat is admitted (and stored) or dropped in the cycle it arrives.
            rx_admit.eq(rx_room),
            If(sink.valid,
                If(~rx_room,
                    NextValue(rx_dropped, rx_dropped + 1)
                ),
                If(~sink.last,
                    If(rx_room,
                        NextState("RECEIVE")
                    ).Else(
                        NextState("DROP")
                    )
                )
            )
        )
        rx_fsm.act("RECEIVE",
            rx_admit.eq(1),
            If(sink.valid & sink.last,
                NextState("IDLE")
            )
        )
        rx_fsm.act("DROP",
            If(sink.valid & sink.last,
                NextState("IDLE")
            )
        )
        return rx_data, rx_meta, rx_count, rx_dropped, rx_errors


class MACPortConverter(LiteXModule):
    """A CPUMACPort (8 bits) on a MAC crossbar of `dw` bits, whose user ports LiteEth does not
    convert (get_port(dw=8) on a wider MAC connects mismatched streams without an error).

        crossbar port.source ─► wide_sink ─► StrideConverter ─► last handler ─► source ─► CPU port
        crossbar port.sink ◄─ wide_source ◄─ StrideConverter ◄─ sink (last_be = last) ◄─ CPU port

    The MAC's header fields (addresses, EtherType) are in eth_mac_description's payload beside
    the data, so LiteX's StrideConverter cannot take the whole word: it converts the data, `last_be`
    and `error` (eth_phy_description), and the header goes around it. Received: a word stays at
    the converter's sink until its last byte is taken, so its header is shown with each byte, and
    each frame ends at its last valid byte (LiteEth's last handler drops the lanes after it, as
    LiteEth's MAC does for an 8-bit PHY). Sent: the header is taken with each byte accepted (all
    of a frame's bytes carry the same), so a word shows its own frame's header while it waits;
    `last_be` is the 8-bit `last`."""
    def __init__(self, dw):
        self.wide_sink   = wide_sink   = stream.Endpoint(eth_mac_description(dw))
        self.wide_source = wide_source = stream.Endpoint(eth_mac_description(dw))
        self.sink        = sink        = stream.Endpoint(eth_mac_description(8))
        self.source      = source      = stream.Endpoint(eth_mac_description(8))

        # # #

        header = ("target_mac", "sender_mac", "ethernet_type")
        self.rx_converter = rx = stream.StrideConverter(eth_phy_description(dw), eth_phy_description(8))
        self.rx_last      = rx_last = LiteEthLastHandler(eth_phy_description(8))
        self.tx_converter = tx = stream.StrideConverter(eth_phy_description(8), eth_phy_description(dw))
        self.comb += [
            wide_sink.connect(rx.sink, omit=set(header)),
            rx.source.connect(rx_last.sink),
            rx_last.source.connect(source),
            [getattr(source, f).eq(getattr(wide_sink, f)) for f in header],
            sink.connect(tx.sink, omit={"last_be", *header}),
            tx.sink.last_be.eq(sink.last),
            tx.source.connect(wide_source, omit=set(header)),
        ]
        self.sync += If(sink.valid & sink.ready, [getattr(wide_source, f).eq(getattr(sink, f)) for f in header])
