#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""The simulated board's PHY: LiteX's GMII model on the wire side, and what a real PHY chip adds
on the management side: IEEE 802.3 clause 22 registers over MDIO, a link that goes up and down,
and auto-negotiation with a link partner.

The firmware manages the PHYs of real boards through LiteEth's `LiteEthPHYMDIO` (CSRs `mdio_w`
and `mdio_r`: MDC and MDIO as bits). `SimPHY` has the same CSRs, so the same firmware runs on
both. Behind them, `MDIOPHYModel` answers as a gigabit copper PHY would:

  reg 0  BMCR    auto-negotiation enable, forced speed and duplex; bit 15 resets the registers
  reg 1  BMSR    abilities, link status (latching low: a link that dropped reads 0 once, even if
                 it is back), auto-negotiation complete
  reg 2,3 PHYID  SIM_PHY_ID
  reg 4  ANAR    what we advertise (10/100); reg 9 GBCR: 1000BASE-T
  reg 5  ANLPAR  what the link partner advertises (10/100); reg 10 GBSR: 1000BASE-T
  reg 6  ANER    the partner can auto-negotiate
  reg 15 ESTATUS 1000BASE-T full and half duplex

The cable (`ethdaq_sim_cable.v`) is how tests unplug it and choose the partner: every
POLL_CYCLES it reads the file `cable` in the simulation's directory, "LINK SPEED DUPLEX" (for
example "0 1000 1" unplugged, "1 100 1" a partner that does 100 Mb/s full duplex at most); without
the file the cable is in and the partner does 1000 Mb/s full duplex. The partner advertises every
mode up to its speed (half duplex only if DUPLEX is 0), as a switch port limited to that speed
would; a partner that changes speed or duplex drops the link for one poll first, renegotiating
as a real one does. While the link is down no frame crosses the pins, in either direction (a frame in flight
when it drops is finished: the model of the wire cannot truncate one). The GMII model itself
runs at 1000 Mb/s whatever the negotiated speed: the firmware warns when they differ.

The injector (`ethdaq_sim_inject.v`) is how tests put arbitrary frames on the receive pins, byte
for byte: the C model always adds a good preamble and FCS to what Linux sends, so bad FCSs, bad
preambles or SFDs, exact runts and rx_er only come this way. Every POLL_CYCLES, unless it is still
playing the last one, it reads the file `inject` in the simulation's directory (`inject_text()`):
a sequence number SEQ, the number of frames N, then for each frame its byte count L and L bytes
in hex, everything that goes on the pins with rx_dv high (preamble and SFD, then the frame and its
FCS: `wire_frame()`; a negative L sends the frame with rx_er high). A file whose SEQ was the last
played is not played again; after the N frames it writes "SEQ N" to `inject.done` ("SEQ error"
for a file it could not read whole). `inject()` writes the file atomically and waits for that.
The tap's frames are never lost, cut or mixed with injected ones: on the pins each frame is either
a whole tap frame or a whole injected one, at least INJECT_IFG idle cycles apart; a tap frame that
finds the pins idle goes through at once, unchanged and undelayed, otherwise it waits whole in a
FIFO (INJECT_FIFO_BYTES). The injector is on the wire side of the cable: an unplugged cable stops
injected frames as it stops the others.

The tap's wire is the simulation module TAP_MODULE (gateware/simmodules/ethdaq_gmii, built by
LiteX's simulation Makefile beside its own modules; derived from LiteX's gmii_ethernet). It puts a
frame from Linux on the pins as a PHY would (preamble, SFD, the frame padded to 60 bytes, FCS),
at most TAP_MAX_FRAME bytes without FCS, and waits TAP_IFG idle cycles before the next: Linux's
frames reach the board no faster than a gigabit wire carries them. It holds at most TAP_QUEUE
frames and does not read the tap while they are all waiting, so a host that sends faster than
the wire fills the kernel's queue for the tap, and the kernel drops and counts what does not fit
(TX dropped in `ip -s link show` for the tap), as a NIC's transmit queue does; the simulation
never stops or falls behind for it. A tap frame longer than TAP_MAX_FRAME is dropped whole and
reported on the console, never cut. Paced so, tap frames wait in the injector's FIFO only behind
injected frames, never more than the longest injected frame's bytes plus a gap: an inject file
with a frame over INJECT_MAX_FRAME bytes is refused, so the FIFO cannot overflow.

The PHY is not reset by the SoC's resets (watchdog, reboot): like a PHY chip beside the FPGA it
keeps its registers and its link; it runs in a reset-less domain on the sys clock.
"""

import os
import time
from pathlib import Path

from migen import *

from litex.gen import *

from litex.soc.interconnect.csr import *

from liteeth.phy.gmii import LiteEthPHYGMII

SIM_PHY_ADDRESS = 3            # Not the first the firmware tries (1): it has to find it.
SIM_PHY_ID      = 0x65646171   # "edaq": a model, not a chip (OUI bits of no vendor we know of).
POLL_CYCLES     = 2**17        # The cable and inject files are read every ~1 ms of simulated time at 125 MHz.

# The injector (module docstring).
INJECT_IFG        = 12         # Idle cycles at least between any two frames on the receive pins.
INJECT_FIFO_BITS  = 14         # Tap frames waiting while injected ones play: 16 KiB.
INJECT_FIFO_BYTES = 2**INJECT_FIFO_BITS
INJECT_MAX_BYTES  = 2**20      # Per inject file: bytes of all its frames, and frames.
INJECT_MAX_FRAMES = 4096
# Bytes of one injected frame at most (on the pins): the tap's frames behind it must fit the FIFO.
INJECT_MAX_FRAME  = INJECT_FIFO_BYTES - 2*INJECT_IFG

# The tap's wire (module docstring), as in gateware/simmodules/ethdaq_gmii/ethdaq_gmii.c; its tap
# queue (TAP_MAX_FRAME, TAP_QUEUE) is gateware/simmodules/common/tapqueue.h, shared with ethdaq_xgmii.
TAP_MODULE    = "ethdaq_gmii"
SIM_MODULES   = {TAP_MODULE: Path(__file__).resolve().parent / "simmodules" / TAP_MODULE}
TAP_IFG       = 12             # Idle cycles after each frame from the tap: the standard gap.
TAP_MAX_FRAME = 9216           # Bytes without FCS: the usual jumbo limit; longer ones are dropped whole.
TAP_QUEUE     = 16             # Frames the module holds; the kernel's queue holds the rest.
# The simulated 10G board's wire (boards/sim10g.py): XGMII pins to the tap, the same pacing and
# limits at 10 Gb/s (gateware/simmodules/ethdaq_xgmii/ethdaq_xgmii.c).
XGMII_TAP_MODULE = "ethdaq_xgmii"
SIM_MODULES_10G  = {XGMII_TAP_MODULE: Path(__file__).resolve().parent / "simmodules" / XGMII_TAP_MODULE}
PREAMBLE          = bytes.fromhex("55555555555555d5")   # Seven 0x55 and the SFD, as on the pins.

# Clause 22 register numbers and bits (IEEE 802.3 22.2.4, 28.2.4, 40.5).
BMCR, BMSR, PHYID1, PHYID2, ANAR, ANLPAR, ANER, GBCR, GBSR, ESTATUS = 0, 1, 2, 3, 4, 5, 6, 9, 10, 15
BMCR_RESET, BMCR_SPEED_LSB, BMCR_ANENABLE, BMCR_ANRESTART, BMCR_FULLDPLX, BMCR_SPEED_MSB = \
    1 << 15, 1 << 13, 1 << 12, 1 << 9, 1 << 8, 1 << 6
BMSR_ABILITIES  = 0x7909       # 100TX FD/HD, 10 FD/HD, extended status, AN ability, extended regs.
BMSR_LSTATUS, BMSR_ANEGCOMPLETE, BMSR_ESTATEN = 1 << 2, 1 << 5, 1 << 8
ADV_10HALF, ADV_10FULL, ADV_100HALF, ADV_100FULL, ADV_ACK = 1 << 5, 1 << 6, 1 << 7, 1 << 8, 1 << 14
ANAR_RESET      = ADV_100FULL | ADV_100HALF | ADV_10FULL | ADV_10HALF | 0x0001  # selector: 802.3
ADV_1000HALF, ADV_1000FULL = 1 << 8, 1 << 9        # GBCR
LPA_1000HALF, LPA_1000FULL = 1 << 10, 1 << 11      # GBSR
GBSR_RX_OK      = (1 << 13) | (1 << 12)            # Local and remote receiver status OK.
GBCR_RESET      = ADV_1000FULL | ADV_1000HALF
ESTATUS_1000_T  = (1 << 13) | (1 << 12)
BMCR_RESET_VALUE = BMCR_ANENABLE | BMCR_FULLDPLX | BMCR_SPEED_MSB

# Speed codes of the cable's partner and of the resolved link.
SPEED_10, SPEED_100, SPEED_1000 = 0, 1, 2
SPEED_CODES = {10: SPEED_10, 100: SPEED_100, 1000: SPEED_1000}


def cable_line(link=True, speed=1000, full_duplex=True):
    """The text of the cable file (module docstring) for this state."""
    if speed not in SPEED_CODES:
        raise ValueError(f"the simulated PHY's partner runs at 10, 100 or 1000 Mb/s, not {speed!r}")
    return f"{int(bool(link))} {speed} {int(bool(full_duplex))}\n"


def wire_frame(frame_with_fcs, preamble=PREAMBLE):
    """What the receive pins carry for a frame (destination MAC first, FCS last): `preamble` (the
    usual seven 0x55 and the SFD 0xD5 unless a test wants them broken) then the frame."""
    return bytes(preamble) + bytes(frame_with_fcs)


def inject_text(seq, frames, rx_er=()):
    """The text of the inject file (module docstring) playing `frames` (bytes each, exactly as on the
    pins: preamble and SFD, frame, FCS; `wire_frame()`) as sequence number `seq`; the frames whose
    indexes are in `rx_er` go with rx_er high on every byte."""
    if not isinstance(seq, int) or not 0 <= seq < 2**31:
        raise ValueError(f"an inject sequence number is an integer from 0 to 2^31-1, not {seq!r}")
    frames = [bytes(f) for f in frames]
    rx_er = set(rx_er)
    if not rx_er <= set(range(len(frames))):
        raise ValueError(f"rx_er names frames {sorted(rx_er - set(range(len(frames))))} of {len(frames)}")
    if len(frames) > INJECT_MAX_FRAMES:
        raise ValueError(f"{len(frames)} frames: the injector plays at most {INJECT_MAX_FRAMES} per file")
    if any(not f for f in frames):
        raise ValueError("an injected frame has at least one byte")
    if any(len(f) > INJECT_MAX_FRAME for f in frames):
        raise ValueError(f"a frame of {max(map(len, frames))} bytes: the injector plays frames of at most "
                         f"{INJECT_MAX_FRAME} bytes (the tap's frames behind one wait in its FIFO)")
    if sum(map(len, frames)) > INJECT_MAX_BYTES:
        raise ValueError(f"{sum(map(len, frames))} bytes: the injector plays at most {INJECT_MAX_BYTES} per file")
    lines = [str(seq), str(len(frames))]
    for i, f in enumerate(frames):
        lines.append(str(-len(f) if i in rx_er else len(f)))
        lines += [" ".join(f"{b:02x}" for b in f[k:k + 32]) for k in range(0, len(f), 32)]
    return "\n".join(lines) + "\n"


class InjectError(RuntimeError):
    pass


_last_seq = [time.time_ns() // 1000 % 2**30]


def inject(gateware_dir, frames, seq=None, timeout=60, rx_er=()):
    """Play `frames` (`inject_text()`) on the receive pins of the simulation running in
    `gateware_dir`, and wait until it says it has (the last frame and its gap are out). Returns
    the sequence number (a new one unless `seq` is given). The file is written atomically and
    removed once played, so a simulation started later in the same directory does not play it.
    Raises InjectError if the simulation could not read it, TimeoutError if it did not play it
    within `timeout` seconds (wall clock)."""
    d = Path(gateware_dir)
    if seq is None:
        _last_seq[0] = (_last_seq[0] + 1) % 2**31
        seq = _last_seq[0]
    text = inject_text(seq, frames, rx_er)
    done, target, tmp = d / "inject.done", d / "inject", d / "inject.tmp"
    done.unlink(missing_ok=True)
    tmp.write_text(text)
    os.replace(tmp, target)
    deadline = time.monotonic() + timeout
    said = ""
    try:
        while True:
            try:
                said = done.read_text()
            except FileNotFoundError:
                said = ""
            words = said.split() if said.endswith("\n") else []
            if words[:1] == [str(seq)]:
                if words[1:] == [str(len(frames))]:
                    return seq
                raise InjectError(f"the simulation in {d} could not play inject file {seq} "
                                  f"(inject.done: {said.strip()!r}; its console says why)")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the simulation in {d} did not play inject file {seq} within {timeout} s "
                                   f"(inject.done: {said.strip()!r}); is it running there?")
            time.sleep(0.02)
    finally:
        target.unlink(missing_ok=True)


class MDIOPHYModel(LiteXModule):
    """Clause 22 management interface of one PHY at `address`.

    mdc, mdio_i: the management station's clock and data (sampled on MDC's rising edge);
    mdio_o, mdio_oe: what this PHY drives (during a read's second turnaround bit and its data,
    each bit set up after a rising edge for the station to sample before the next).
    link, partner_speed, partner_full: the cable. Outputs: link_up (what BMSR reports now),
    speed and full_duplex as negotiated (or forced through BMCR).
    """
    def __init__(self, address=SIM_PHY_ADDRESS, phy_id=SIM_PHY_ID):
        self.mdc     = Signal()
        self.mdio_i  = Signal(reset=1)
        self.mdio_o  = Signal()
        self.mdio_oe = Signal()
        self.link          = Signal(reset=1)
        self.partner_speed = Signal(2, reset=SPEED_1000)
        self.partner_full  = Signal(reset=1)
        self.link_up     = Signal()
        self.speed       = Signal(2)
        self.full_duplex = Signal()

        # # #

        bmcr = Signal(16, reset=BMCR_RESET_VALUE)
        anar = Signal(16, reset=ANAR_RESET)
        gbcr = Signal(16, reset=GBCR_RESET)
        link_latch = Signal()  # BMSR.2: 0 once after the link dropped, until read.
        autoneg, anlpar, gbsr = self._add_negotiation(bmcr, anar, gbcr)
        bmsr = Signal(16)
        self.comb += bmsr.eq(BMSR_ABILITIES | Mux(link_latch, BMSR_LSTATUS, 0) |
                             Mux(self.link_up & autoneg, BMSR_ANEGCOMPLETE, 0))
        regs = {BMCR: bmcr, BMSR: bmsr, ANAR: anar, ANLPAR: anlpar, GBCR: gbcr, GBSR: gbsr}
        self._add_management(address, phy_id, regs, autoneg, link_latch)

    def _add_negotiation(self, bmcr, anar, gbcr):
        """Speed and duplex from BMCR (forced) or auto-negotiation with the cable's partner:
        (autoneg, the partner's ANLPAR, GBSR)."""
        # Auto-negotiation (28B.3 priority resolution): the best mode both sides advertise. The
        # partner advertises every mode up to its speed; half duplex only when it is half duplex.
        lp_10_half, lp_10_full, lp_100_half, lp_100_full, lp_1000_half, lp_1000_full = (Signal() for _ in range(6))
        self.comb += [
            lp_10_half.eq(1),
            lp_10_full.eq(self.partner_full),
            lp_100_half.eq(self.partner_speed >= SPEED_100),
            lp_100_full.eq((self.partner_speed >= SPEED_100) & self.partner_full),
            lp_1000_half.eq(self.partner_speed == SPEED_1000),
            lp_1000_full.eq((self.partner_speed == SPEED_1000) & self.partner_full),
        ]
        anlpar = Signal(16)
        gbsr   = Signal(16)
        autoneg = Signal()
        common = Signal()
        self.comb += [
            anlpar.eq(Mux(self.link_up & autoneg,
                ADV_ACK | 0x0001 | Mux(lp_10_half, ADV_10HALF, 0) | Mux(lp_10_full, ADV_10FULL, 0) |
                Mux(lp_100_half, ADV_100HALF, 0) | Mux(lp_100_full, ADV_100FULL, 0), 0)),
            gbsr.eq(Mux(self.link_up & autoneg,
                Mux(lp_1000_half, LPA_1000HALF, 0) | Mux(lp_1000_full, LPA_1000FULL, 0) |
                Mux(self.speed == SPEED_1000, GBSR_RX_OK, 0), 0)),
            autoneg.eq((bmcr & BMCR_ANENABLE) != 0),
        ]
        self.comb += [
            common.eq(1),
            If(~autoneg,
                # Forced: the speed and duplex BMCR says; the partner must run the same speed.
                self.speed.eq(Cat((bmcr & BMCR_SPEED_LSB) != 0, (bmcr & BMCR_SPEED_MSB) != 0)),
                self.full_duplex.eq((bmcr & BMCR_FULLDPLX) != 0),
                common.eq(self.speed == self.partner_speed),
            ).Elif(((gbcr & ADV_1000FULL) != 0) & lp_1000_full,
                self.speed.eq(SPEED_1000), self.full_duplex.eq(1),
            ).Elif(((gbcr & ADV_1000HALF) != 0) & lp_1000_half,
                self.speed.eq(SPEED_1000), self.full_duplex.eq(0),
            ).Elif(((anar & ADV_100FULL) != 0) & lp_100_full,
                self.speed.eq(SPEED_100), self.full_duplex.eq(1),
            ).Elif(((anar & ADV_100HALF) != 0) & lp_100_half,
                self.speed.eq(SPEED_100), self.full_duplex.eq(0),
            ).Elif(((anar & ADV_10FULL) != 0) & lp_10_full,
                self.speed.eq(SPEED_10), self.full_duplex.eq(1),
            ).Elif(((anar & ADV_10HALF) != 0) & lp_10_half,
                self.speed.eq(SPEED_10), self.full_duplex.eq(0),
            ).Else(
                common.eq(0),
            ),
            self.link_up.eq(self.link & common),
        ]
        return autoneg, anlpar, gbsr

    def _add_management(self, address, phy_id, regs, autoneg, link_latch):
        """Management frames in and out on MDIO, the registers read, BMCR/ANAR/GBCR written."""
        sync = self.sync
        bmcr, bmsr, anar, anlpar, gbcr, gbsr = (regs[r] for r in (BMCR, BMSR, ANAR, ANLPAR, GBCR, GBSR))
        # Management frames: 32 ones of preamble, ST 01, OP (10 read, 01 write), PHYAD, REGAD,
        # turnaround, 16 bits of data (IEEE 802.3 22.2.4.5).
        mdc_d   = Signal()
        rising  = Signal()
        ones    = Signal(6)
        shift   = Signal(14)  # ST, OP, PHYAD, REGAD as they arrive.
        count   = Signal(5)
        data    = Signal(16)
        regad   = Signal(5)
        reading = Signal()
        sync += mdc_d.eq(self.mdc)
        self.comb += rising.eq(self.mdc & ~mdc_d)

        read_value = Signal(16)
        self.comb += Case(regad, {
            BMCR:    read_value.eq(bmcr),
            BMSR:    read_value.eq(bmsr),
            PHYID1:  read_value.eq(phy_id >> 16),
            PHYID2:  read_value.eq(phy_id & 0xffff),
            ANAR:    read_value.eq(anar),
            ANLPAR:  read_value.eq(anlpar),
            ANER:    read_value.eq(Mux(self.link_up & autoneg, 1, 0)),
            GBCR:    read_value.eq(gbcr),
            GBSR:    read_value.eq(gbsr),
            ESTATUS: read_value.eq(ESTATUS_1000_T),
            "default": read_value.eq(0),
        })

        bmsr_read = Signal()
        self.fsm = fsm = FSM(reset_state="PREAMBLE")
        fsm.act("PREAMBLE",
            If(rising,
                If(self.mdio_i,
                    If(ones != 63, NextValue(ones, ones + 1)),
                ).Else(
                    # The start's 0 after at least 32 ones: the frame begins.
                    If(ones >= 32, NextValue(count, 0), NextState("HEADER")),
                    NextValue(ones, 0),
                )
            )
        )
        # ST's 1, OP, PHYAD, REGAD: 13 more bits.
        fsm.act("HEADER",
            If(rising,
                NextValue(shift, Cat(self.mdio_i, shift)),
                NextValue(count, count + 1),
                If(count == 12,
                    # shift holds, oldest first (bit 11 down): ST's 1, OP (2), PHYAD (5), REGAD's
                    # first 4 bits; this bit is REGAD's last.
                    If((shift[11] == 1) & (shift[4:9] == address) & (shift[9] != shift[10]),
                        NextValue(regad, Cat(self.mdio_i, shift[0:4])),
                        NextValue(reading, shift[10]),  # OP 10: read.
                        NextValue(count, 0),
                        NextState("TURNAROUND"),
                    ).Else(
                        NextValue(ones, 0), NextState("PREAMBLE"),
                    )
                )
            )
        )
        # Two turnaround bits: on a read the PHY drives the second one, 0.
        fsm.act("TURNAROUND",
            If(rising,
                NextValue(count, count + 1),
                If(count == 0,
                    If(reading, NextValue(data, read_value), NextValue(self.mdio_oe, 1),
                        NextValue(self.mdio_o, 0)),
                ).Else(
                    NextValue(count, 0),
                    If(reading, NextValue(self.mdio_o, data[15]), NextValue(data, data << 1)),
                    NextState("DATA"),
                )
            )
        )
        fsm.act("DATA",
            If(rising,
                NextValue(count, count + 1),
                If(reading,
                    NextValue(self.mdio_o, data[15]), NextValue(data, data << 1),
                ).Else(
                    NextValue(data, Cat(self.mdio_i, data[:15])),
                ),
                If(count == 15,
                    NextValue(self.mdio_oe, 0),
                    NextValue(ones, 0),
                    NextState("END"),
                )
            )
        )
        fsm.act("END",  # A write takes effect here.
            NextState("PREAMBLE"),
        )
        self.comb += bmsr_read.eq(fsm.ongoing("TURNAROUND") & rising & (count == 0) & reading & (regad == BMSR))
        sync += [
            # The link status latches low (22.2.4.2.13): a link that drops clears it at once;
            # reading BMSR (which returns the latched value) sets it to the link as it is now.
            If(~self.link_up, link_latch.eq(0)
            ).Elif(bmsr_read, link_latch.eq(1)),
            If(fsm.ongoing("END") & ~reading,
                Case(regad, {
                    BMCR: If(data & BMCR_RESET,
                              bmcr.eq(BMCR_RESET_VALUE), anar.eq(ANAR_RESET), gbcr.eq(GBCR_RESET),
                          ).Else(
                              bmcr.eq(data & ~(BMCR_RESET | BMCR_ANRESTART))),
                    ANAR: anar.eq(data),
                    GBCR: gbcr.eq(data),
                })
            ),
        ]


class SimMDIO(LiteXModule):
    """LiteEthPHYMDIO's CSRs (mdio_w: mdc, oe, w; mdio_r: r), wired to the PHY model instead of a
    tristate pin; the line idles high (the board's pull-up) when nobody drives it."""
    def __init__(self, model):
        self._w = CSRStorage(fields=[
            CSRField("mdc", size=1),
            CSRField("oe",  size=1),
            CSRField("w",   size=1)],
            name="w")
        self._r = CSRStatus(fields=[
            CSRField("r", size=1)],
            name="r")

        # # #

        line = Signal()
        self.comb += [
            model.mdc.eq(self._w.storage[0]),
            line.eq(Mux(self._w.storage[1], self._w.storage[2], Mux(model.mdio_oe, model.mdio_o, 1))),
            model.mdio_i.eq(line),
        ]
        line_r = Signal(reset=1)
        self.sync += line_r.eq(line)
        self.comb += self._r.fields.r.eq(line_r)


class SimPHY(LiteEthPHYGMII):
    """LiteX's GMII model with an injector for arbitrary frames on its receive side, behind a cable
    that can be unplugged, with a clause 22 PHY on MDIO (module docstring)."""
    def __init__(self, platform, pads):
        gated = Record([(name, len(getattr(pads, name))) for name in ("rx_data", "rx_dv", "rx_er",
                                                                       "tx_data", "tx_en", "tx_er")])
        LiteEthPHYGMII.__init__(self, None, gated, model=True)
        self.cd_simphy = ClockDomain(reset_less=True)
        self.comb += self.cd_simphy.clk.eq(ClockSignal("sys"))
        self.phy  = ClockDomainsRenamer("simphy")(MDIOPHYModel())
        self.mdio = SimMDIO(self.phy)

        # # #

        # The cable file, read by the simulation in its own directory.
        platform.add_source(str(Path(__file__).resolve().parent / "verilog" / "ethdaq_sim_cable.v"))
        speed = Signal(2)
        self.specials += Instance("ethdaq_sim_cable", p_POLL_CYCLES=POLL_CYCLES,
            i_clk=ClockSignal("sys"), o_link=self.phy.link, o_speed=speed, o_full_duplex=self.phy.partner_full)
        self.comb += self.phy.partner_speed.eq(speed)

        # The injector: the C model's frames and injected ones, whole, on the receive side.
        platform.add_source(str(Path(__file__).resolve().parent / "verilog" / "ethdaq_sim_inject.v"))
        rx = Record([("rx_data", 8), ("rx_dv", 1), ("rx_er", 1)])
        self.specials += Instance("ethdaq_sim_inject",
            p_POLL_CYCLES=POLL_CYCLES, p_IFG=INJECT_IFG, p_FIFO_BITS=INJECT_FIFO_BITS,
            p_MAX_BYTES=INJECT_MAX_BYTES, p_MAX_FRAMES=INJECT_MAX_FRAMES, p_MAX_FRAME=INJECT_MAX_FRAME,
            i_clk=ClockSignal("sys"),
            i_rx_data_i=pads.rx_data, i_rx_dv_i=pads.rx_dv, i_rx_er_i=pads.rx_er,
            o_rx_data_o=rx.rx_data, o_rx_dv_o=rx.rx_dv, o_rx_er_o=rx.rx_er)

        # Frames cross only while the link is up, whole: the gate changes between frames.
        rx_pass = Signal()
        tx_pass = Signal()
        self.sync.simphy += [
            If(~rx.rx_dv, rx_pass.eq(self.phy.link_up)),
            If(~gated.tx_en, tx_pass.eq(self.phy.link_up)),
        ]
        self.comb += [
            gated.rx_data.eq(rx.rx_data),
            gated.rx_dv.eq(rx.rx_dv & rx_pass),
            gated.rx_er.eq(rx.rx_er & rx_pass),
            pads.tx_data.eq(gated.tx_data),
            pads.tx_en.eq(gated.tx_en & tx_pass),
            pads.tx_er.eq(gated.tx_er & tx_pass),
        ]

        # RX_ER on the stream's `error`, byte for byte (LiteEth's GMII receiver drops it): LiteEth's
        # preamble and FCS checkers carry it on, and the receive audit (gateware/rxaudit.py)
        # counts a frame with it as phy_error.
        self.sync.eth_rx += self.rx.source.error.eq(gated.rx_er)


class SimMIIPHY(LiteXModule):
    """LiteEth's own MII PHY (a nibble per cycle on the low four pins) on a 25 MHz clock made from
    the 125 MHz sys clock (every fifth cycle), with the simulated PHY chip's MDIO and cable: a
    100 Mb/s board's PHY for two-board simulations whose pins the testbench wires (bench/ptp2.py
    --phy mii). No tap, injector or link gate: the pins are the testbench's."""
    dw          = 8
    tx_clk_freq = 25e6
    rx_clk_freq = 25e6
    with_preamble_crc = True

    def __init__(self, platform, pads):
        from liteeth.phy.mii import LiteEthPHYMIIRX, LiteEthPHYMIITX
        self.cd_eth_tx = ClockDomain()
        self.cd_eth_rx = ClockDomain()
        # The PHY chip's management side, as SimPHY's: MDIO registers and the cable file.
        self.cd_simphy = ClockDomain(reset_less=True)
        self.comb += self.cd_simphy.clk.eq(ClockSignal("sys"))
        self.phy  = ClockDomainsRenamer("simphy")(MDIOPHYModel())
        self.mdio = SimMDIO(self.phy)
        platform.add_source(str(Path(__file__).resolve().parent / "verilog" / "ethdaq_sim_cable.v"))
        speed = Signal(2)
        self.specials += Instance("ethdaq_sim_cable", p_POLL_CYCLES=POLL_CYCLES,
            i_clk=ClockSignal("sys"), o_link=self.phy.link, o_speed=speed, o_full_duplex=self.phy.partner_full)
        self.comb += self.phy.partner_speed.eq(speed)

        # # #

        # sys / 5, high for two of the five cycles; eth_rx and eth_tx both on it, as from one PHY.
        phase = Signal(3)
        clk25 = Signal()
        self.sync.simphy += [
            phase.eq(Mux(phase == 4, 0, phase + 1)),
            clk25.eq(phase >= 2),
        ]
        self.comb += [self.cd_eth_tx.clk.eq(clk25), self.cd_eth_rx.clk.eq(clk25)]
        self.tx = ClockDomainsRenamer("eth_tx")(LiteEthPHYMIITX(pads))
        self.rx = ClockDomainsRenamer("eth_rx")(LiteEthPHYMIIRX(pads))
        self.sink, self.source = self.tx.sink, self.rx.source
