#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""The simulated board's PHY model (gateware/simphy.py) against management frames written here
from IEEE 802.3 clause 22 (22.2.4.5: preamble, ST, OP, PHYAD, REGAD, TA, data; the station
samples a read's data before each rising edge of MDC, the PHY changes it after)."""

from migen import *

from ethdaq.gateware import simphy
from ethdaq.gateware.simphy import (ANAR, ANLPAR, BMCR, BMSR, ESTATUS, GBCR, GBSR, PHYID1, PHYID2,
                                    SPEED_10, SPEED_100, SPEED_1000, MDIOPHYModel)

HALF = 3  # sys cycles per MDC half period
A = simphy.SIM_PHY_ADDRESS


class Station:
    """A management station bit-banging the model's pins; `line` is what the station sees: the
    PHY's output while it drives, its own while it drives, else the pull-up."""
    def __init__(self, dut):
        self.dut = dut
        self.own = None  # None: released

    def _bit(self, value):
        """One MDC period: set (or release) the line, rising edge, falling edge. Returns what the
        station saw on the line just before the rising edge."""
        dut = self.dut
        self.own = value
        yield dut.mdio_i.eq(1 if value is None else value)
        for _ in range(HALF):
            yield
        oe = yield dut.mdio_oe
        seen = (yield dut.mdio_o) if (value is None and oe) else (1 if value is None else value)
        yield dut.mdc.eq(1)
        for _ in range(HALF):
            yield
        yield dut.mdc.eq(0)
        return seen

    def frame_bits(self, op, phy, reg, data=0, preamble=32):
        bits = [1] * preamble + [0, 1] + ([1, 0] if op == "read" else [0, 1])
        bits += [(phy >> (4 - i)) & 1 for i in range(5)] + [(reg >> (4 - i)) & 1 for i in range(5)]
        if op == "read":
            return bits + [None] * 18
        return bits + [1, 0] + [(data >> (15 - i)) & 1 for i in range(16)]

    def read(self, phy, reg, preamble=32):
        seen = []
        for b in self.frame_bits("read", phy, reg, preamble=preamble):
            seen.append((yield from self._bit(b)))
        yield from self._bit(None)  # Idle clock after the frame.
        turnaround = seen[-18:-16]
        value = 0
        for b in seen[-16:]:
            value = value << 1 | b
        return turnaround, value

    def write(self, phy, reg, data):
        for b in self.frame_bits("write", phy, reg, data):
            yield from self._bit(b)
        yield from self._bit(None)


def run(body, **cable):
    dut = MDIOPHYModel()
    out = {}

    def gen():
        yield dut.link.eq(cable.get("link", 1))
        yield dut.partner_speed.eq(cable.get("speed", SPEED_1000))
        yield dut.partner_full.eq(cable.get("full", 1))
        yield
        yield from body(dut, Station(dut), out)
    run_simulation(dut, gen())
    return out


def test_identifies_itself_at_its_address_only():
    def body(dut, st, out):
        # First: the released line between frames reads as ones, which count as preamble.
        out["short"] = yield from st.read(simphy.SIM_PHY_ADDRESS, PHYID1, preamble=31)
        out["id1"] = yield from st.read(simphy.SIM_PHY_ADDRESS, PHYID1)
        out["id2"] = yield from st.read(simphy.SIM_PHY_ADDRESS, PHYID2)
        out["other"] = yield from st.read(0, PHYID1)
    out = run(body)
    # The PHY drives the second turnaround bit low, then its data.
    assert out["id1"] == ([1, 0], simphy.SIM_PHY_ID >> 16)
    assert out["id2"] == ([1, 0], simphy.SIM_PHY_ID & 0xffff)
    # Another address, or a preamble short of 32 ones: nobody drives, the pull-up reads ones.
    assert out["other"] == ([1, 1], 0xffff)
    assert out["short"] == ([1, 1], 0xffff)


def test_link_status_latches_low_until_read():
    def body(dut, st, out):
        reads = []
        reads.append((yield from st.read(A, BMSR))[1])   # power-on: latched low
        reads.append((yield from st.read(A, BMSR))[1])   # now up
        yield dut.link.eq(0)
        for _ in range(10):
            yield
        yield dut.link.eq(1)                               # back before anyone looked
        yield
        reads.append((yield from st.read(A, BMSR))[1])   # the drop is remembered
        reads.append((yield from st.read(A, BMSR))[1])
        yield dut.link.eq(0)
        yield
        reads.append((yield from st.read(A, BMSR))[1])
        reads.append((yield from st.read(A, BMSR))[1])
        out["reads"] = reads
    up = simphy.BMSR_LSTATUS
    reads = run(body)["reads"]
    assert [bool(r & up) for r in reads] == [False, True, False, True, False, False]
    assert reads[1] & simphy.BMSR_ANEGCOMPLETE and not reads[5] & simphy.BMSR_ANEGCOMPLETE
    assert all(r & 0xff08 == simphy.BMSR_ABILITIES & 0xff08 for r in reads)  # abilities, AN able


def test_partner_abilities_and_negotiated_mode():
    def body(dut, st, out):
        for name, reg in (("anlpar", ANLPAR), ("gbsr", GBSR), ("estatus", ESTATUS)):
            out[name] = (yield from st.read(A, reg))[1]
        out["mode"] = ((yield dut.speed), (yield dut.full_duplex), (yield dut.link_up))
    gig = run(body)
    assert gig["gbsr"] & (simphy.LPA_1000FULL | simphy.LPA_1000HALF) == simphy.LPA_1000FULL | simphy.LPA_1000HALF
    assert gig["anlpar"] & simphy.ADV_100FULL and gig["anlpar"] & simphy.ADV_ACK
    assert gig["mode"] == (SPEED_1000, 1, 1)
    assert gig["estatus"] == simphy.ESTATUS_1000_T
    fast_half = run(body, speed=SPEED_100, full=0)
    assert fast_half["gbsr"] & (simphy.LPA_1000FULL | simphy.LPA_1000HALF) == 0
    assert fast_half["anlpar"] & (simphy.ADV_100HALF | simphy.ADV_100FULL | simphy.ADV_10FULL) == simphy.ADV_100HALF
    assert fast_half["mode"] == (SPEED_100, 0, 1)
    slow = run(body, speed=SPEED_10)
    assert slow["mode"] == (SPEED_10, 1, 1)
    unplugged = run(body, link=0)
    assert unplugged["anlpar"] == 0 and unplugged["mode"][2] == 0


def test_writes_change_what_is_advertised_and_reset_restores_it():
    def body(dut, st, out):
        yield from st.write(A, GBCR, 0)           # no 1000BASE-T
        out["gbcr"] = (yield from st.read(A, GBCR))[1]
        out["mode_no_gig"] = ((yield dut.speed), (yield dut.full_duplex))
        yield from st.write(A, ANAR, 0x0001 | simphy.ADV_10HALF)
        out["mode_10half"] = ((yield dut.speed), (yield dut.full_duplex))
        # Forced 100 Mb/s full duplex: auto-negotiation off.
        yield from st.write(A, BMCR, simphy.BMCR_SPEED_LSB | simphy.BMCR_FULLDPLX)
        out["bmcr"] = (yield from st.read(A, BMCR))[1]
        out["mode_forced"] = ((yield dut.speed), (yield dut.full_duplex), (yield dut.link_up))
        yield from st.write(0, BMCR, simphy.BMCR_RESET)   # another PHY's: ignored
        out["bmcr_other"] = (yield from st.read(A, BMCR))[1]
        yield from st.write(A, BMCR, simphy.BMCR_RESET)
        out["after_reset"] = []
        for r in (BMCR, ANAR, GBCR):
            out["after_reset"].append((yield from st.read(A, r))[1])
        out["mode_reset"] = ((yield dut.speed), (yield dut.full_duplex))
    out = run(body)
    assert out["gbcr"] == 0
    assert out["mode_no_gig"] == (SPEED_100, 1)
    assert out["mode_10half"] == (SPEED_10, 0)
    assert out["bmcr"] == simphy.BMCR_SPEED_LSB | simphy.BMCR_FULLDPLX
    # A forced 100 Mb/s end against a 1000 Mb/s partner: no link.
    assert out["mode_forced"] == (SPEED_100, 1, 0)
    assert out["bmcr_other"] == out["bmcr"]
    assert out["after_reset"] == [simphy.BMCR_RESET_VALUE, simphy.ANAR_RESET, simphy.GBCR_RESET]
    assert out["mode_reset"] == (SPEED_1000, 1)


def test_cable_line():
    assert simphy.cable_line(False) == "0 1000 1\n"
    assert simphy.cable_line(True, 100, False) == "1 100 0\n"
    import pytest
    with pytest.raises(ValueError, match="10, 100 or 1000"):
        simphy.cable_line(True, 2500)
