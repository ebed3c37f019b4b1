"""MACErrors (gateware/macstats.py) and the receive side of TXPath (gateware/txpath.py): frames as
LiteEth's GMII PHY delivers them (preamble, SFD, FCS; last_be left at 0), with the FCS computed by
zlib (an independent CRC-32), through TXPath's receive connection into LiteEth's MAC core: a good
frame passes unflagged; a frame with one bit of its FCS flipped, or a broken SFD, is flagged and
counted, and the CSRs show LiteEth's counts. Without TXPath's last_be, LiteEth's
FCS checker checks nothing (the second test pins that upstream behaviour, so we notice if it
changes)."""

import zlib

import pytest

from migen import ClockDomain, run_simulation

from litex.gen import LiteXModule
from litex.soc.interconnect import stream

from liteeth.common import eth_phy_description
from liteeth.mac.core import LiteEthMACCore

from ethdaq.gateware.macpipeline import replace_rx_crc
from ethdaq.gateware.macstats import MACErrors
from ethdaq.gateware.txpath import TXPath


class _PHY:
    dw = 8

    def __init__(self):
        self.sink   = stream.Endpoint(eth_phy_description(8))
        self.source = stream.Endpoint(eth_phy_description(8))


class Dut(LiteXModule):
    def __init__(self, through_txpath=True, fcschecker=False):
        for cd in ("sys", "eth_rx", "eth_tx"):
            setattr(self, f"cd_{cd}", ClockDomain(cd))
        self.phy  = _PHY()
        mac_phy = self.phy
        if through_txpath:
            self.txpath = TXPath(self.phy, 0x10e2d5000001, "192.168.1.50")
            mac_phy = self.txpath.mac_phy
        self.core = LiteEthMACCore(mac_phy, dw=8, with_preamble_crc=True)
        if fcschecker:
            replace_rx_crc(self.core)
        self.errors = MACErrors(self.core)


def frame(payload, fcs_flip=0, sfd=0xD5):
    body = bytes.fromhex("ffffffffffff10e2d50000010800") + payload
    fcs = zlib.crc32(body) ^ fcs_flip
    return bytes([0x55] * 7 + [sfd]) + body + fcs.to_bytes(4, "little")


def run_frames(through_txpath, fcschecker=False):
    dut = Dut(through_txpath, fcschecker)
    # The fourth frame ends inside its preamble (no SFD): LiteEth's preamble checker drops it.
    frames = [frame(bytes(46)), frame(bytes(range(46)), fcs_flip=1), frame(bytes(46), sfd=0xD4),
              bytes([0x55] * 12), frame(bytes(64))]
    got = {"out": []}

    def phy_side():
        for f in frames:
            for i, b in enumerate(f):
                yield dut.phy.source.valid.eq(1)
                yield dut.phy.source.data.eq(b)
                yield dut.phy.source.last.eq(i == len(f) - 1)
                yield
            yield dut.phy.source.valid.eq(0)
            for _ in range(20):
                yield

    def core_side():
        yield dut.core.source.ready.eq(1)
        n = 0
        for _ in range(2000):
            if (yield dut.core.source.valid):
                n += 1
                if (yield dut.core.source.last):
                    got["out"].append((n, (yield dut.core.source.error)))
                    n = 0
            yield
        got["fcs"] = yield dut.errors._fcs_errors.status
        got["preamble"] = yield dut.errors._preamble_errors.status

    run_simulation(dut, {"eth_rx": [phy_side()], "sys": [core_side()]},
                   clocks={"sys": 10, "eth_rx": 10, "eth_tx": 10})
    return got


@pytest.mark.parametrize("fcschecker", [False, True], ids=["liteeth", "fcschecker"])
def test_bad_fcs_and_bad_preamble_are_flagged_and_counted_in_their_class(fcschecker):
    """`fcschecker`: with gateware/fcschecker.py's checker in place of LiteEth's
    (macpipeline.replace_rx_crc), the bytes, flags and counts are the same."""
    got = run_frames(through_txpath=True, fcschecker=fcschecker)
    # (bytes delivered without preamble and FCS, error flag on the last): LiteEth flags, it does
    # not drop; the consumers must (gateware/cpuport.py CPUMACPort does; see docs/liteeth-notes.md).
    assert got["out"] == [(60, 0), (60, 1), (51, 1), (78, 0)]
    # LiteEth's preamble checker passes a frame with a broken SFD on, misaligned (51 bytes), and
    # it fails the FCS check: both bad frames count as FCS errors. The frame without an SFD is
    # the preamble error, and goes nowhere.
    assert (got["fcs"], got["preamble"]) == (2, 1)


def test_upstream_liteeth_checks_no_fcs_when_the_phy_leaves_last_be_at_0():
    got = run_frames(through_txpath=False)
    assert got["out"] == [(60, 0), (60, 0), (51, 0), (78, 0)] and (got["fcs"], got["preamble"]) == (0, 1)


def test_the_fcs_checker_replacement_refuses_a_mac_without_its_checker():
    core = LiteEthMACCore(_PHY(), dw=8, with_preamble_crc=False)
    with pytest.raises(ValueError, match="with_preamble_crc=True"):
        replace_rx_crc(core)
