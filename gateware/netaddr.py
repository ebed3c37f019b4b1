#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""The board's own network addresses, changeable at run time (the control protocol's CONFIG_SET
ip/mac/netmask/gateway).

    CPU ─► ip, mac, netmask, gateway (staged CSRs) ─► apply ─► ip, mac, netmask, gateway (sys:
                                        │                   LiteEth's MAC filter, ARP, IP, PTP port)
                                        └──► ip_tx, mac_tx, announce (cd_tx: the DAQ framer and
                                             the ARP requester)

Writing the two staged registers changes nothing; `apply` switches every user to the new pair at
once (a 48-bit CSR is written word by word, so a live register would be half old, half new in
between). The copies in `cd_tx` follow a toggle through a synchroniser: by the time it has
crossed, the sys values have been stable for two `cd_tx` cycles, so they are sampled whole.
The netmask and gateway route what LiteEth's IP layer sends (the CPU's answers, PTP over UDP):
`route_ip_tx` makes its ARP table ask for the gateway instead of a destination outside the
subnet (`next_hop`), while the IP header keeps the real destination. A gateway of 0.0.0.0 is
none: every destination is asked for directly. The DAQ stream's next hop is the firmware's
choice (protocol/route.h, the same decision), written with its destination.
Every apply, once the transmit side has the new pair, sends one ARP announcement (RFC 5227: a
who-has for our own address from our own MAC), which moves the neighbours' caches to a new MAC
at once; applying the same pair again repeats it. Reset returns to the build's addresses.
"""

from migen import *
from migen.fhdl.structure import _Assign
from migen.genlib.cdc import MultiReg

from litex.gen import *

from litex.soc.interconnect.csr import CSR, CSRStatus

from ethdaq.gateware.csr import CSRConfig


def next_hop(ip, netmask, gateway, dst):
    """The address whose MAC a datagram to `dst` goes to (a Migen expression): `dst` when it is
    on-link (no gateway, the limited broadcast or IPv4 multicast, or inside ip/netmask), else
    `gateway`. The firmware's route_next_hop (protocol/route.h) decides the same."""
    on_link = ((gateway == 0) | (dst == 0xFFFFFFFF) | (dst[28:32] == 0xE) | (((dst ^ ip) & netmask) == 0))
    return Mux(on_link, dst, gateway)


def route_ip_tx(ip_tx, arp_table, ip, netmask, gateway):
    """Make LiteEth's IP transmitter (`ip_tx`, a LiteEthIPTX, before it is finalized) ask its ARP
    table (`arp_table`, a LiteEthARPTable) for the next hop of each datagram instead of its
    destination: the gateway for one outside the subnet. The header's destination stays the
    datagram's own."""
    comb   = ip_tx._fragment.comb
    target = arp_table.request.ip_address
    found  = [j for j, st in enumerate(comb) if isinstance(st, _Assign) and st.l is target]
    if len(found) != 1:
        raise ValueError(f"route_ip_tx: {len(found)} assignments of the ARP table's request address found in "
                         f"{type(ip_tx).__name__}, not 1; LiteEth no longer asks its ARP table this way")
    st = comb[found[0]]
    comb[found[0]] = target.eq(next_hop(ip, netmask, gateway, st.r))


class NetAddress(LiteXModule):
    def __init__(self, ip_address, mac_address, netmask=0xFFFFFF00, gateway=0, cd_tx="eth_tx", cd_rx=None):
        if not (0 <= ip_address < 2**32):
            raise ValueError(f"ip_address must be a 32-bit IPv4 address, not {ip_address!r}")
        if not (0 <= mac_address < 2**48) or (mac_address >> 40) & 1:
            raise ValueError(f"mac_address must be a 48-bit unicast address, not {mac_address!r}")
        # Write-only (CSRConfig): the firmware keeps the pair it wrote, so the 80 bits do not
        # need the CSR bus's read multiplexer.
        self._ip      = CSRConfig(32, reset=ip_address,  description="Next IPv4 address (taken at `apply`).")
        self._mac     = CSRConfig(48, reset=mac_address, description="Next MAC address (taken at `apply`).")
        self._netmask = CSRConfig(32, reset=netmask, description="Next IPv4 netmask (taken at `apply`).")
        self._gateway = CSRConfig(32, reset=gateway, description="Next default gateway, 0: none (taken at `apply`).")
        self._apply   = CSR()  # Write: switch to `ip`/`mac`/`netmask`/`gateway` and announce.
        self._pending = CSRStatus(description="1 until the transmit side has taken the last apply and sent its announcement.")
        self.ip       = Signal(32, reset=ip_address)
        self.mac      = Signal(48, reset=mac_address)
        self.netmask  = Signal(32, reset=netmask)
        self.gateway  = Signal(32, reset=gateway)
        self.ip_tx    = Signal(32, reset=ip_address)
        self.mac_tx   = Signal(48, reset=mac_address)
        self.announce = Signal()  # cd_tx: one cycle, once the new pair is in ip_tx/mac_tx.
        self.announced = Signal() # cd_tx input: the requester has sent the announcement.
        self.mac_rx   = Signal(48, reset=mac_address)  # cd_rx (if given): for the receive audit and classifier.
        self.ip_rx    = Signal(32, reset=ip_address)

        # # #

        toggle = Signal()
        self.sync += If(self._apply.re,
            self.ip.eq(self._ip.storage),
            self.mac.eq(self._mac.storage),
            self.netmask.eq(self._netmask.storage),
            self.gateway.eq(self._gateway.storage),
            toggle.eq(~toggle),
        )

        # Transmit side: sample the (stable) sys values when the toggle has crossed.
        toggle_tx = Signal()
        seen_tx   = Signal()
        self.specials += MultiReg(toggle, toggle_tx, cd_tx)
        sync_tx = getattr(self.sync, cd_tx)
        sync_tx += [
            self.announce.eq(0),
            If(toggle_tx != seen_tx,
                seen_tx.eq(toggle_tx),
                self.ip_tx.eq(self.ip),
                self.mac_tx.eq(self.mac),
                self.announce.eq(1),
            )
        ]

        # Receive side, the same way.
        if cd_rx is not None:
            toggle_rx, seen_rx = Signal(), Signal()
            self.specials += MultiReg(toggle, toggle_rx, cd_rx)
            sync_rx = getattr(self.sync, cd_rx)
            sync_rx += If(toggle_rx != seen_rx,
                seen_rx.eq(toggle_rx),
                self.mac_rx.eq(self.mac),
                self.ip_rx.eq(self.ip),
            )

        # Done: the announcement has left the requester, reported back across as a toggle too.
        done_tx = Signal()
        done    = Signal()
        sync_tx += If(self.announced, done_tx.eq(seen_tx))
        self.specials += MultiReg(done_tx, done)
        self.comb += self._pending.status.eq(done != toggle)
