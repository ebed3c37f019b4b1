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


# The injector (gateware/verilog/ethdaq_sim_inject.v) ------------------------------------------------

def parse_inject_text(text):
    """The inject file read back as the injector reads it: whitespace-separated numbers."""
    words = text.split()
    seq, n, at = int(words[0]), int(words[1]), 2
    frames, errors = [], []
    for i in range(n):
        length = int(words[at])
        at += 1
        frames.append(bytes(int(w, 16) for w in words[at:at + abs(length)]))
        at += abs(length)
        if length < 0:
            errors.append(i)
    assert at == len(words)
    return seq, frames, errors


def test_wire_frame_puts_the_preamble_and_sfd_first():
    frame = bytes(range(64))
    assert simphy.wire_frame(frame) == bytes([0x55] * 7 + [0xD5]) + frame
    assert simphy.wire_frame(frame, preamble=b"\x55\x55\xd4") == b"\x55\x55\xd4" + frame
    assert simphy.wire_frame(frame, preamble=b"") == frame


def test_inject_text_is_seq_count_then_length_and_hex_bytes_per_frame():
    frames = [simphy.wire_frame(bytes(range(100))), b"\xd5", bytes(range(256)) * 3]
    text = simphy.inject_text(42, frames, rx_er=[1])
    lines = text.splitlines()
    assert lines[:3] == ["42", "3", "108"] and text.endswith("\n")
    assert lines[3].split()[:9] == ["55"] * 7 + ["d5", "00"]
    assert parse_inject_text(text) == (42, frames, [1])
    assert simphy.inject_text(0, []) == "0\n0\n"
    import pytest
    with pytest.raises(ValueError, match="sequence number"):
        simphy.inject_text(-1, frames)
    with pytest.raises(ValueError, match="sequence number"):
        simphy.inject_text(2**31, frames)
    with pytest.raises(ValueError, match="at least one byte"):
        simphy.inject_text(1, [b""])
    with pytest.raises(ValueError, match="rx_er"):
        simphy.inject_text(1, frames, rx_er=[3])
    with pytest.raises(ValueError, match="at most"):
        simphy.inject_text(1, [b"x" * (simphy.INJECT_MAX_BYTES + 1)])
    with pytest.raises(ValueError, match="at most"):
        simphy.inject_text(1, [b"x"] * (simphy.INJECT_MAX_FRAMES + 1))


def test_inject_writes_atomically_waits_for_done_and_cleans_up(tmp_path):
    import threading
    import pytest
    seen = {}

    def simulation(reply):
        # Plays the file as the injector would: reads it whole, answers in inject.done.
        while not (tmp_path / "inject").exists():
            pass
        seen["text"] = (tmp_path / "inject").read_text()
        seq = seen["text"].split()[0]
        (tmp_path / "inject.done").write_text(reply.format(seq=seq))

    (tmp_path / "inject.done").write_text("7 1\n")   # A previous run's: not taken for this one.
    t = threading.Thread(target=simulation, args=("{seq} 1\n",))
    t.start()
    assert simphy.inject(tmp_path, [b"\x55\xd5abc"], seq=7, timeout=10) == 7
    t.join()
    assert parse_inject_text(seen["text"]) == (7, [b"\x55\xd5abc"], [])
    assert not (tmp_path / "inject").exists() and not (tmp_path / "inject.tmp").exists()
    t = threading.Thread(target=simulation, args=("{seq} error\n",))
    t.start()
    with pytest.raises(simphy.InjectError, match="could not play"):
        simphy.inject(tmp_path, [b"x"], timeout=10)
    t.join()
    with pytest.raises(TimeoutError, match="did not play inject file 9"):
        simphy.inject(tmp_path, [b"x"], seq=9, timeout=0.2)
    assert not (tmp_path / "inject").exists()


INJECT_TB = r"""
#include <cstdio>
#include <fstream>
#include <string>
#include "Vethdaq_sim_inject.h"
#include "verilated.h"

// Per line of the stimulus: "DV ER DATA" (one cycle of the C model's pins), or a command:
// "! mv NAME" renames NAME to inject, "! save NAME" renames inject.done to NAME.
int main(int argc, char **argv) {
    VerilatedContext ctx;
    Vethdaq_sim_inject top{&ctx};
    std::ifstream in(argv[1]);
    FILE *out = fopen(argv[2], "w");
    std::string line;
    top.clk = 0;
    top.eval();
    while (std::getline(in, line) && !ctx.gotFinish()) {
        if (line.rfind("! mv ", 0) == 0) { rename(line.substr(5).c_str(), "inject"); continue; }
        if (line.rfind("! save ", 0) == 0) { rename("inject.done", line.substr(7).c_str()); continue; }
        unsigned dv, er, data;
        sscanf(line.c_str(), "%u %u %x", &dv, &er, &data);
        top.rx_dv_i = dv; top.rx_er_i = er; top.rx_data_i = data;
        top.eval();
        fprintf(out, "%u %u %02x\n", top.rx_dv_o, top.rx_er_o, top.rx_data_o);
        top.clk = 1; top.eval();
        top.clk = 0; top.eval();
    }
    fclose(out);
    top.final();
    return 0;
}
"""

TB_POLL, TB_FIFO_BITS, TB_MAX_BYTES, TB_MAX_FRAMES = 64, 8, 8192, 16


def _verilator_or_skip():
    import shutil
    import pytest
    if shutil.which("verilator") is None:
        pytest.skip("verilator not installed")


_tb_cache = {}


def build_inject_tb(tmp_path_factory):
    """The injector alone under Verilator, with a short poll and a 256-byte FIFO."""
    import subprocess
    from pathlib import Path
    if "exe" not in _tb_cache:
        d = tmp_path_factory.mktemp("inject_tb")
        (d / "tb.cpp").write_text(INJECT_TB)
        src = Path(simphy.__file__).resolve().parent / "verilog" / "ethdaq_sim_inject.v"
        subprocess.run(["verilator", "--cc", str(src), "--exe", "tb.cpp", "--build", "-Wno-fatal", "-Wno-lint",
                        "-Wno-style", "--top-module", "ethdaq_sim_inject", "-Mdir", "obj",
                        f"-GPOLL_CYCLES={TB_POLL}", f"-GFIFO_BITS={TB_FIFO_BITS}", f"-GMAX_BYTES={TB_MAX_BYTES}",
                        f"-GMAX_FRAMES={TB_MAX_FRAMES}", "-CFLAGS", "-O1"],
                       cwd=d, check=True, capture_output=True)
        _tb_cache["exe"] = d / "obj" / "Vethdaq_sim_inject"
    return _tb_cache["exe"]


class Stim:
    """The C model's receive pins, cycle by cycle."""
    def __init__(self):
        self.lines = []

    def idle(self, n):
        self.lines += ["0 0 00"] * n

    def tap(self, wire, gap=1):
        """A tap frame as the C model sends it: its bytes, then `gap` idle cycles (1: back to back)."""
        start = len([l for l in self.lines if not l.startswith("!")])
        self.lines += [f"1 0 {b:02x}" for b in wire]
        self.idle(gap)
        return start

    def command(self, text):
        self.lines.append("! " + text)

    @property
    def cycles(self):
        return len([l for l in self.lines if not l.startswith("!")])


def run_tb(exe, workdir, stim, finished=True):
    import subprocess
    (workdir / "stim").write_text("\n".join(stim.lines) + "\n")
    r = subprocess.run([str(exe), "stim", "out"], cwd=workdir, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    cycles = [line.split() for line in (workdir / "out").read_text().splitlines()]
    # Frames on the output: (first cycle, bytes, rx_er on every byte), and the idle cycles before each.
    frames, gaps, cur, idle = [], [], None, None
    for i, (dv, er, data) in enumerate(cycles):
        if dv == "1":
            if cur is None:
                cur = [i, bytearray(), set()]
                gaps.append(idle)
            cur[1].append(int(data, 16))
            cur[2].add(er)
            idle = 0
        else:
            if cur is not None:
                frames.append((cur[0], bytes(cur[1]), cur[2] == {"1"}))
                cur = None
            if idle is not None:
                idle += 1
    assert cur is None or not finished, "the run ended inside a frame"
    return frames, gaps, r.stdout, len(cycles)


def _wire(tag, length):
    """A distinct frame of `length` bytes on the wire (preamble and SFD first)."""
    body = bytes([tag]) + bytes((tag * 7 + i) & 0xFF for i in range(length - 9))
    return simphy.wire_frame(body)


def test_injector_plays_whole_frames_beside_the_taps_never_mixing_or_losing_one(tmp_path, tmp_path_factory):
    """The injector under Verilator against C-model-like tap traffic: a tap frame that finds the
    pins idle goes through undelayed and unchanged; injected frames (one with rx_er) come out
    byte for byte, whole, in order; tap frames sent back to back during the injection come out
    whole, in order, each either before or after an injected frame, never inside one; every two
    frames are INJECT_IFG idle cycles apart at least; the file is played once, `inject.done` says
    so; a file with a missing byte is not played and says so."""
    _verilator_or_skip()
    exe = build_inject_tb(tmp_path_factory)
    ifg = simphy.INJECT_IFG
    injected = [_wire(0x80 + i, n) for i, n in enumerate((72, 1, 9, 200, 64))]
    injected[1] = b"\xd5"                                  # One byte: an exact runt of runts.
    (tmp_path / "a").write_text(simphy.inject_text(5, injected, rx_er=[2]))
    bad = simphy.inject_text(6, [_wire(0x90, 70)])
    (tmp_path / "b").write_text(bad[:bad.rindex(" ")] + "\n")   # The last byte missing.
    s = Stim()
    s.idle(10)
    s.command("mv a")
    lone = _wire(0x10, 70)
    lone_at = s.tap(lone, gap=20)
    # The first poll is at cycle TB_POLL - 1: the first injected frame starts, then a burst back to
    # back arrives, then frames spaced out, over the rest of the injection.
    s.idle(TB_POLL + 6 - s.cycles)
    burst = [_wire(0x20 + i, n) for i, n in enumerate((60, 64, 100, 61, 80, 70, 66, 90))]
    for f in burst:
        s.tap(f, gap=1)
    spaced = [_wire(0x40 + i, n) for i, n in enumerate((64, 65, 66, 67, 68, 69))]
    for f in spaced:
        s.tap(f, gap=150)
    burst += spaced
    s.idle(20 * TB_POLL)                   # Polls again with the same file: not played twice.
    s.command("save done-a")
    s.command("mv b")
    after = _wire(0x30, 64)
    s.tap(after, gap=1)
    s.idle(2 * TB_POLL)
    s.command("save done-b")
    frames, gaps, stdout, _ = run_tb(exe, tmp_path, s)

    assert (tmp_path / "done-a").read_text() == "5 5\n"
    assert (tmp_path / "done-b").read_text() == "6 error\n"
    assert "inject 6: frame 0: byte 69 missing" in stdout
    # The lone frame: at once and unchanged.
    assert frames[0] == (lone_at, lone, False)
    # Every frame whole, in its own order, none mixed: an interleaving of the two sequences.
    taps, injs = [lone] + burst + [after], list(injected)
    order = []
    for _, data, er in frames:
        if taps and data == taps[0]:
            taps.pop(0)
            order.append("t")
            assert not er
        else:
            assert injs and data == injs[0], (data.hex(), order)
            assert er == (len(injected) - len(injs) == 2)
            injs.pop(0)
            order.append("i")
    assert taps == [] and injs == []
    import re
    assert re.search("it+i", "".join(order)), order   # Tap frames went between injected ones.
    assert all(g >= ifg for g in gaps[1:]), gaps
    assert min(gaps[1:]) == ifg


def test_injector_stops_the_simulation_rather_than_drop_a_tap_frame(tmp_path, tmp_path_factory):
    """Tap frames faster than the wire (one idle cycle apart) behind an injected frame fill the
    (here 256-byte) FIFO: the simulation stops and says so."""
    _verilator_or_skip()
    exe = build_inject_tb(tmp_path_factory)
    (tmp_path / "a").write_text(simphy.inject_text(1, [_wire(0x80, 200)]))
    s = Stim()
    s.command("mv a")
    s.idle(TB_POLL + 5)
    for i in range(10):
        s.tap(_wire(0x20 + i, 100), gap=1)
    s.idle(5000)
    frames, gaps, stdout, cycles = run_tb(exe, tmp_path, s, finished=False)
    assert "FIFO of 256 bytes for the tap's frames overflowed" in stdout
    assert cycles < s.cycles


def test_tap_frames_at_the_wires_rate_never_overflow_the_fifo_behind_the_longest_injected_frames(
        tmp_path, tmp_path_factory):
    """The tap's C model (ethdaq_gmii) sends at most at the wire's rate, TAP_IFG idle cycles
    apart. A flood of them, paced so, that starts just after an injected frame of the longest
    size the injector takes (the FIFO's size less two gaps) waits whole in the FIFO behind it and
    comes out whole and in order, the simulation running on; an inject file with a frame one byte
    longer is not played."""
    _verilator_or_skip()
    exe = build_inject_tb(tmp_path_factory)
    ifg, longest = simphy.TAP_IFG, 2**TB_FIFO_BITS - 2*simphy.INJECT_IFG
    injected = [_wire(0x80 + i, longest) for i in range(3)]
    for i, f in enumerate(injected):
        (tmp_path / f"a{i}").write_text(simphy.inject_text(i + 1, [f]))
    too_long = _wire(0x90, longest + 1)
    (tmp_path / "b").write_text(f"9 1 {len(too_long)} " + " ".join(f"{b:02x}" for b in too_long) + "\n")
    s = Stim()
    taps, sent_at = [], []

    def tap(gap):
        taps.append(_wire(0x20 + len(taps) % 64, 72 if len(taps) % 5 else 200))
        sent_at.append(s.tap(taps[-1], gap=gap))

    for i in range(len(injected)):
        s.idle(2 * longest)            # The FIFO empties.
        s.command(f"mv a{i}")
        # The file is read during a flood at the wire's rate, which leaves the injector no room;
        # a gap one cycle longer does: the injected frame starts in it, the flood goes on behind.
        end = s.cycles + 2 * TB_POLL
        while s.cycles < end:
            tap(ifg)
        s.idle(1)
        end = s.cycles + 2 * longest
        while s.cycles < end:
            tap(ifg)
        s.idle(2 * longest)
        s.command(f"save done-a{i}")
    s.command("mv b")
    s.idle(2 * TB_POLL)
    s.command("save done-b")
    frames, gaps, stdout, _ = run_tb(exe, tmp_path, s)
    assert "overflowed" not in stdout
    assert [(tmp_path / f"done-a{i}").read_text() for i in range(3)] == ["1 1\n", "2 1\n", "3 1\n"]
    assert (tmp_path / "done-b").read_text() == "9 error\n"
    assert f"frame 0 has {len(too_long)} bytes, more than {longest}: not played" in stdout
    assert [d for _, d, _ in frames if d in injected] == injected
    out = [(at, d) for at, d, _ in frames if d not in injected]
    assert [d for _, d in out] == taps
    # They waited behind the injected frames: as long as one of them and its gap, less the cycle
    # between the two frames' starts.
    assert max(o - i for (o, _), i in zip(out, sent_at)) == longest + simphy.INJECT_IFG - 1
    assert all(g >= simphy.INJECT_IFG for g in gaps[1:]), gaps


def test_the_tap_modules_limits_are_the_ones_documented_here():
    """simphy's TAP_MAX_FRAME and TAP_QUEUE describe the C modules' shared tap queue
    (gateware/simmodules/common/tapqueue.h), which both wire modules include."""
    import re
    from pathlib import Path
    simmodules = Path(simphy.__file__).resolve().parent / "simmodules"
    header = (simmodules / "common" / "tapqueue.h").read_text()
    defines = dict(re.findall(r"^#define (TAPQ_\w+)\s+(\d+)", header, re.M))
    assert int(defines["TAPQ_MAX_FRAME"]) == simphy.TAP_MAX_FRAME
    assert int(defines["TAPQ_LEN"]) == simphy.TAP_QUEUE
    for module in (simphy.TAP_MODULE, simphy.XGMII_TAP_MODULE):
        assert '#include "tapqueue.h"' in (simmodules / module / f"{module}.c").read_text()
