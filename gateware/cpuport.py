#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""CPU UDP port: lets the firmware send and receive datagrams on one UDP port of the
hardware LiteEth UDP/IP stack.

The hardware stack answers ARP and ICMP and carries bulk data without the CPU; the CPU only
needs its control port. Instead of a second MAC and a software IP stack, the firmware gets a
datagram mailbox on the hardware UDP crossbar:

- RX: whole datagrams are admitted only when the buffer can hold them, so a datagram is either
  stored completely or dropped and counted (``rx_dropped``); the UDP stack is never stalled.
- TX: the firmware writes the payload into a buffer, then ``tx_send`` streams the complete
  datagram, so the MAC never sees a pause inside a frame.
"""

from migen import *

from litex.gen import *

from litex.soc.interconnect import stream
from litex.soc.interconnect.csr import *

from liteeth.common import eth_udp_user_description

# CPU UDP Port -------------------------------------------------------------------------------------

class CPUUDPPort(LiteXModule):
    """Datagram mailbox between one LiteEth UDP user port (dw=8) and the CPU's CSR bus.

    Parameters
    ----------
    udp_port : int
        Local UDP port; used as source port of transmitted datagrams.
    rx_depth : int
        Receive buffer in bytes (all stored datagrams together).
    rx_datagrams : int
        Maximum number of stored datagrams waiting for the CPU.
    tx_depth : int
        Largest datagram payload the CPU can send, in bytes.
    """
    def __init__(self, udp_port, rx_depth=2048, rx_datagrams=4, tx_depth=2048):
        if not (0 < udp_port < 65536):
            raise ValueError(f"udp_port must be in 1..65535, not {udp_port!r}")
        for name, depth in [("rx_depth", rx_depth), ("tx_depth", tx_depth)]:
            if depth < 64 or depth & (depth - 1):
                raise ValueError(f"{name} must be a power of two >= 64, not {depth!r}")
        self.udp_port = udp_port
        self.sink     = sink   = stream.Endpoint(eth_udp_user_description(8)) # From UDP crossbar.
        self.source   = source = stream.Endpoint(eth_udp_user_description(8)) # To UDP crossbar.

        # RX CSRs.
        self._rx_ready     = CSRStatus(description="1 when a received datagram is waiting.")
        self._rx_ip        = CSRStatus(32, description="Source IPv4 address of the waiting datagram.")
        self._rx_port      = CSRStatus(16, description="Source UDP port of the waiting datagram.")
        self._rx_length    = CSRStatus(16, description="Stored payload bytes of the waiting datagram.")
        self._rx_truncated = CSRStatus(description="1 if the waiting datagram lost bytes (declared length above what arrived).")
        self._rx_data      = CSRStatus(8,  description="Current payload byte of the waiting datagram.")
        self._rx_next      = CSR()  # Write: advance to the next payload byte.
        self._rx_consume   = CSR()  # Write: discard the rest of the waiting datagram.
        self._rx_count     = CSRStatus(32, description="Datagrams accepted.")
        self._rx_dropped   = CSRStatus(32, description="Datagrams dropped because the buffer was full or they were too large.")

        # TX CSRs.
        self._tx_data      = CSRStorage(8,  description="Write: append one payload byte.")
        self._tx_ip        = CSRStorage(32, description="Destination IPv4 address.")
        self._tx_port      = CSRStorage(16, description="Destination UDP port.")
        self._tx_send      = CSR()  # Write: send the appended payload as one datagram.
        self._tx_busy      = CSRStatus(description="1 while a datagram is being sent.")
        self._tx_count     = CSRStatus(32, description="Datagrams sent.")
        self._tx_dropped   = CSRStatus(32, description="Datagrams discarded because the payload exceeded tx_depth.")

        # # #

        # RX Data-Path.
        # -------------
        self.rx_data = rx_data = stream.SyncFIFO([("data", 8)], depth=rx_depth, buffered=True)
        self.rx_meta = rx_meta = stream.SyncFIFO(
            [("ip", 32), ("port", 16), ("length", 16), ("truncated", 1)], depth=rx_datagrams)

        rx_free    = Signal(max=rx_depth + 2)
        rx_stored  = Signal(16)
        rx_seen    = Signal(16)
        rx_length  = Signal(16)
        rx_ip      = Signal(32)
        rx_port    = Signal(16)
        rx_dropped = Signal(32)
        rx_count   = Signal(32)
        self.comb += rx_free.eq(rx_depth - rx_data.level)

        self.rx_fsm = rx_fsm = FSM(reset_state="IDLE")
        rx_fsm.act("IDLE",
            If(sink.valid,
                # Admission: the whole declared payload must fit, so a datagram is stored
                # completely or not at all.
                If(rx_meta.sink.ready & (sink.length <= rx_free),
                    NextValue(rx_stored, 0),
                    NextValue(rx_seen,   0),
                    NextValue(rx_length, sink.length),
                    NextValue(rx_ip,     sink.ip_address),
                    NextValue(rx_port,   sink.src_port),
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
                If(sink.last,
                    NextState("COMMIT")
                )
            )
        )
        rx_fsm.act("COMMIT",
            rx_meta.sink.valid.eq(1),
            rx_meta.sink.ip.eq(rx_ip),
            rx_meta.sink.port.eq(rx_port),
            rx_meta.sink.length.eq(rx_stored),
            rx_meta.sink.truncated.eq(rx_stored != rx_length),
            NextValue(rx_count, rx_count + 1),
            NextState("IDLE")
        )
        rx_fsm.act("DROP",
            sink.ready.eq(1),
            If(sink.valid & sink.last,
                NextState("IDLE")
            )
        )

        # RX Control-Path (CPU side).
        # ---------------------------
        rx_read = Signal(16)
        self.rx_cpu_fsm = rx_cpu_fsm = FSM(reset_state="IDLE")
        rx_cpu_fsm.act("IDLE",
            If(self._rx_next.re & rx_meta.source.valid & rx_data.source.valid & (rx_read < rx_meta.source.length),
                rx_data.source.ready.eq(1),
                NextValue(rx_read, rx_read + 1)
            ),
            If(self._rx_consume.re & rx_meta.source.valid,
                NextState("DRAIN")
            )
        )
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
        self.comb += [
            self._rx_ready.status.eq(rx_meta.source.valid & rx_cpu_fsm.ongoing("IDLE")),
            self._rx_ip.status.eq(rx_meta.source.ip),
            self._rx_port.status.eq(rx_meta.source.port),
            self._rx_length.status.eq(rx_meta.source.length),
            self._rx_truncated.status.eq(rx_meta.source.truncated),
            self._rx_data.status.eq(rx_data.source.data),
            self._rx_count.status.eq(rx_count),
            self._rx_dropped.status.eq(rx_dropped),
        ]

        # TX Data-Path.
        # -------------
        self.tx_data = tx_data = stream.SyncFIFO([("data", 8)], depth=tx_depth, buffered=True)
        tx_length   = Signal(16)
        tx_sent     = Signal(16)
        tx_overflow = Signal()
        tx_count    = Signal(32)
        tx_dropped  = Signal(32)

        self.tx_fsm = tx_fsm = FSM(reset_state="IDLE")
        tx_fsm.act("IDLE",
            tx_data.sink.data.eq(self._tx_data.storage),
            If(self._tx_data.re,
                If(tx_data.sink.ready,
                    tx_data.sink.valid.eq(1),
                    NextValue(tx_length, tx_length + 1)
                ).Else(
                    NextValue(tx_overflow, 1)
                )
            ),
            If(self._tx_send.re,
                NextValue(tx_sent, 0),
                If(tx_overflow,
                    NextValue(tx_dropped, tx_dropped + 1),
                    NextState("FLUSH")
                ).Elif(tx_length != 0,
                    NextState("SEND")
                )
            )
        )
        tx_fsm.act("SEND",
            source.valid.eq(tx_data.source.valid),
            source.data.eq(tx_data.source.data),
            source.last.eq(tx_sent == (tx_length - 1)),
            source.last_be.eq(source.last),
            source.src_port.eq(udp_port),
            source.dst_port.eq(self._tx_port.storage),
            source.ip_address.eq(self._tx_ip.storage),
            source.length.eq(tx_length),
            tx_data.source.ready.eq(source.ready),
            If(source.valid & source.ready,
                NextValue(tx_sent, tx_sent + 1),
                If(source.last,
                    NextValue(tx_length, 0),
                    NextValue(tx_count, tx_count + 1),
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
        self.comb += [
            self._tx_busy.status.eq(~tx_fsm.ongoing("IDLE")),
            self._tx_count.status.eq(tx_count),
            self._tx_dropped.status.eq(tx_dropped),
        ]
