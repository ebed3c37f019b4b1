"""The 10GBASE-R PCS (gateware/baser.py) in Migen simulation, behind ethdaq's XGMII transmitter.

Transmit: every block (sync header and scrambled payload) equals what a reference encoder and a
bit-serial scrambler give for the same XGMII column; both written here from 802.3 clause 49
(figure 49-7's block formats, 49.2.6's scrambler one bit at a time), not from the gateware.
Receive: the blocks come back through a model of the transceiver's gearbox that starts at a
wrong bit offset and slips one bit per `rx_slip`; the PCS must lock, and the columns it
decodes must be the transmitted ones, frames checked by bench.xgmii.decode_xgmii (preamble, FCS
by zlib.crc32), scapy and tshark. Invalid sync headers after lock make error columns, counted."""

import random

from migen import ClockDomain, ClockDomainsRenamer, Signal, run_simulation
from migen.sim import passive

from litex.gen import LiteXModule

from bench import xgmii
from ethdaq.gateware.baser import BaseRPCS
from ethdaq.gateware.xgmiitx import XGMIITransmitter

from test_xgmiitx import check_frames, random_frames, send_words

# Reference model (802.3 clause 49) ----------------------------------------------------------------

IDLE, START, TERMINATE, ERROR = 0x07, 0xFB, 0xFD, 0xFE
T_TYPES = [0x87, 0x99, 0xAA, 0xB4, 0xCC, 0xD2, 0xE1, 0xFF]


def ref_encode(data, ctl):
    """(sync header as sent, bit 0 first; 64-bit payload) of an XGMII column, figure 49-7."""
    lanes = [(data >> 8*i) & 0xFF for i in range(8)]
    code = {IDLE: 0x00, ERROR: 0x1E}
    if ctl == 0:
        return 0b10, data
    if ctl == 0xFF and all(c in code for c in lanes):
        return 0b01, 0x1E | sum(code[c] << (8 + 7*i) for i, c in enumerate(lanes))
    if ctl == 0x01 and lanes[0] == START:
        return 0b01, 0x78 | (data & ~0xFF)
    if ctl == 0x1F and lanes[4] == START and all(c in code for c in lanes[:4]):
        return 0b01, 0x33 | sum(code[c] << (8 + 7*i) for i, c in enumerate(lanes[:4])) | (data >> 40 << 40)
    for k in range(8):
        if ctl == (0xFF << k) & 0xFF and lanes[k] == TERMINATE and all(c in code for c in lanes[k + 1:]):
            block = T_TYPES[k] | (data & ((1 << 8*k) - 1)) << 8
            for n, c in enumerate(lanes[k + 1:]):
                block |= code[c] << (15 + 7*k + 7*n)
            return 0b01, block
    raise AssertionError(f"no block for column {ctl:02x} {data:016x}")


class RefScrambler:
    """802.3 49.2.6, one bit at a time: out = in ^ out(-39) ^ out(-58)."""
    def __init__(self):
        self.history = [0]*58

    def __call__(self, payload):
        out = 0
        for i in range(64):
            bit = (payload >> i) & 1 ^ self.history[-39] ^ self.history[-58]
            self.history = self.history[1:] + [bit]
            out |= bit << i
        return out


def rev(value, width):
    return int(f"{value:0{width}b}"[::-1], 2)

# DUT ----------------------------------------------------------------------------------------------

class Dut(LiteXModule):
    def __init__(self):
        self.cd_eth_tx = ClockDomain()
        self.cd_eth_rx = ClockDomain()
        self.pads = xgmii.XGMIIPads()
        self.tx  = ClockDomainsRenamer("eth_tx")(XGMIITransmitter(self.pads))
        self.pcs = BaseRPCS(self.pads)
        # The receive side is in reset until the transceiver delivers words (LiteEth's GTY holds
        # eth_rx in reset until its receiver is ready): the gearbox model sets rx_ready with
        # its first word.
        self.rx_ready = Signal()
        self.comb += self.cd_eth_rx.rst.eq(~self.rx_ready)


# Enough for 64 valid headers after 5 slips of 65 cycles each.
LOCK_CYCLES = 600


def run_loop(frames, offset, corrupt=()):
    """Frames through transmitter, PCS transmit, a gearbox model starting `offset` bits off,
    and PCS receive. Returns (columns sent, their blocks, blocks expected, received XGMII lines,
    slips, lock cycle, rx_bad_blocks). `corrupt`: indices of received blocks (after lock) whose
    sync header is made 00."""
    dut = Dut()
    sent, blocks, received = [], [], []
    state = {"slips": 0, "lock": None, "bits": [], "pos": offset, "n": 0}
    cycles = LOCK_CYCLES + 100 + sum(len(f) // 8 + 6 for f in frames)

    @passive
    def tx_side():
        # The column on the pads before the first edge: the encoder takes it at that edge.
        state["first"] = ((yield dut.pads.tx_data), (yield dut.pads.tx_ctl))
        while True:
            yield
            sent.append(((yield dut.pads.tx_data), (yield dut.pads.tx_ctl)))
            header, payload = (yield dut.pcs.tx_header), (yield dut.pcs.tx_payload)
            # As sent: bit 0 first of the standard's order (the transceiver's MSB first).
            header, payload = rev(header, 2), rev(payload, 64)
            blocks.append((header, payload))
            state["bits"] += [(header >> i) & 1 for i in range(2)] + [(payload >> i) & 1 for i in range(64)]

    def rx_side():
        for cycle in range(cycles):
            bits, pos = state["bits"], state["pos"]
            if len(bits) >= pos + 66:
                word = bits[pos:pos + 66]
                state["pos"] = pos + 66
                header = word[0] | word[1] << 1
                if state["lock"] is not None and state["n"] in corrupt:
                    header = 0
                state["n"] += state["lock"] is not None
                payload = sum(b << i for i, b in enumerate(word[2:]))
                yield dut.pcs.rx_header.eq(rev(header, 2))
                yield dut.pcs.rx_payload.eq(rev(payload, 64))
                yield dut.rx_ready.eq(1)
            yield
            if (yield dut.pcs.rx_slip):
                state["slips"] += 1
                state["pos"] += 1
            if state["lock"] is None and (yield dut.pcs.rx_lock):
                state["lock"] = cycle
            ctl, data = (yield dut.pads.rx_ctl), (yield dut.pads.rx_data)
            if state["lock"] is not None and (ctl != 0xFF or data != 0x0707070707070707):
                received.append(f"X {cycle} {ctl:02x} {data:016x}")
        state["bad"] = yield dut.pcs.rx_bad_blocks

    # The frames start once the receiver has had time to lock.
    def delayed_frames():
        for _ in range(LOCK_CYCLES):
            yield
        yield from send_words(dut.tx.sink, frames)

    # Each generator in its side's domain (a generator in the default "sys" domain would never
    # run: the design has no sys clock).
    run_simulation(dut, {"eth_tx": [tx_side(), delayed_frames()], "eth_rx": [rx_side()]},
                   clocks={"eth_tx": 10, "eth_rx": 10})
    return sent, blocks, received, state


def expected_blocks(sent, first):
    """The reference's blocks for the columns sent, from the first block read on: the
    encoder's and the scrambler's registers put each column's block two cycles behind it, so the
    first two blocks are the encoder's reset block (an idle block) and the block of `first`, the
    column on the pads before the first edge. The scrambler starts from zero in both."""
    scramble = RefScrambler()
    out = []
    for data, ctl in [(0x0707070707070707, 0xFF), first] + sent:
        header, payload = ref_encode(data, ctl)
        out.append((header, scramble(payload)))
    return out


def test_blocks_match_reference_and_frames_survive_the_loop(tmp_path):
    frames = random_frames(3, 40)[:12]
    sent, blocks, received, state = run_loop(frames, offset=61)
    # Transmit: every block the PCS sent, from its reset on, is the reference's.
    ref = expected_blocks(sent, state["first"])
    assert blocks == ref[:len(blocks)]
    assert any(h == 0b01 and p & 0xFF != 0x1E for h, p in ref), "no frame was encoded"
    # Receive: locked after slipping to the block boundary (5 bits on from 61), every frame intact.
    assert state["lock"] is not None
    assert state["slips"] % 66 == 5
    check_frames(xgmii.decode_xgmii(received), frames, tmp_path)
    assert state["bad"] == 0


def test_invalid_headers_after_lock_are_error_columns_and_counted(tmp_path):
    frames = random_frames(4, 4)
    # Blocks 100..104 after lock get a 00 sync header: five invalid blocks, fewer than the 16
    # that would lose lock; the idles among them become error columns.
    sent, blocks, received, state = run_loop(frames, offset=0, corrupt=range(100, 105))
    assert state["slips"] == 0
    assert state["bad"] == 5
    errors = [l for l in received if l.split()[2] == "ff" and l.split()[3] == "fe"*8]
    assert len(errors) == 5
    check_frames(xgmii.decode_xgmii([l for l in received if l not in errors]), frames, tmp_path)


def test_reference_scrambler_round_trip():
    # The gateware descrambler's equation (out = in ^ in(-39) ^ in(-58)) undoes the reference.
    rng = random.Random(5)
    scramble, history = RefScrambler(), [0]*58
    for _ in range(20):
        word = rng.getrandbits(64)
        s = scramble(word)
        out = 0
        for i in range(64):
            bit = (s >> i) & 1
            out |= (bit ^ history[-39] ^ history[-58]) << i
            history = history[1:] + [bit]
        assert out == word


def test_every_column_kind_encodes_as_the_reference_and_decodes_back():
    """Encoder into decoder, no scrambler: idles, errors, /S/ in lane 0 and 4 (after idles or an
    error), data, /T/ in every lane with idles or an error after it."""
    from migen import Module
    from ethdaq.gateware.baser import BaseRDecoder, BaseREncoder
    columns = [(0x0707070707070707, 0xFF), (0xD5555555555555FB, 0x01), (0x1122334455667788, 0x00),
               (0x332211FB07070707, 0x1F), (0x332211FBFE070707, 0x1F), (0xFEFEFEFEFEFEFEFE, 0xFF),
               (0x07FE07FE07FE07FE, 0xFF), (0xFE0707070707FD11, 0xFE)]
    for k in range(8):
        data = int.from_bytes(bytes(range(0x11, 0x11 + k)) + b"\xfd" + b"\x07"*(7 - k), "little")
        columns.append((data, (0xFF << k) & 0xFF))

    class Loop(Module):
        def __init__(self):
            self.submodules.enc, self.submodules.dec = BaseREncoder(), BaseRDecoder()
            self.comb += [self.dec.header.eq(self.enc.header), self.dec.payload.eq(self.enc.payload),
                          self.dec.lock.eq(1)]

    dut, blocks, back = Loop(), [], []

    def gen():
        for data, ctl in columns + [(0x0707070707070707, 0xFF)]*2:
            yield dut.enc.tx_data.eq(data)
            yield dut.enc.tx_ctl.eq(ctl)
            yield
            blocks.append(((yield dut.enc.header), (yield dut.enc.payload)))
            back.append(((yield dut.dec.rx_data), (yield dut.dec.rx_ctl), (yield dut.dec.bad)))
    run_simulation(dut, gen())
    for i, (data, ctl) in enumerate(columns):
        assert blocks[i + 1] == ref_encode(data, ctl), f"column {i}: {ctl:02x} {data:016x}"
        assert back[i + 2] == (data, ctl, 0), f"column {i}: {ctl:02x} {data:016x}"
