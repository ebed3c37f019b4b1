#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""10GBASE-R PCS (IEEE 802.3 clause 49): XGMII columns to 66-bit blocks and back, for a
transceiver that does the 64b/66b gearbox itself (LiteEth's usp_gty_10g_baser, whose GTY takes a
64-bit word and its 2-bit sync header each cycle).

    tx_data/tx_ctl ─► BaseREncoder ─► BaseRScrambler ─► bit reversal ─► tx_header, tx_payload
    rx_data/rx_ctl ◄─ BaseRDecoder ◄─ BaseRDescrambler ◄─ BaseRBlockLock ◄─ bit reversal ◄─ rx_header, rx_payload
                                                              └─► rx_slip (the gearbox's slip)

Blocks follow 802.3 figure 49-7 with bit 0 sent first: a data block's sync header is 0b10 (0 then
1), a control block's 0b01; a control block's type is its first byte, its 7-bit control codes
packed behind it. The transceiver's gearbox sends its words most significant bit first, so both
are bit-reversed at its boundary.

The encoder takes every column ethdaq's XGMII transmitter makes (gateware/xgmiitx.py: /S/ in lane
0 or 4, /T/ in any lane, idles, errors); any other column is sent as an error block and counted
in `tx_bad_blocks`. The decoder reads every block type of the figure; ordered sets (Local and
Remote Fault, types 0x2D, 0x4B, 0x55 and 0x66's first half) are read as idles: this PCS does not
pass link fault signalling on. Invalid blocks (a sync header of 00 or 11, an unknown type, a
control code other than idle or error) become error columns and are counted in `rx_bad_blocks`.

Untested on hardware; its blocks are checked against a reference encoder and scrambler written
from the standard (test/gateware/test_baser.py).
"""

from functools import reduce
from operator import and_

from migen import *

from litex.gen import *

SYNC_DATA, SYNC_CTRL = 0b10, 0b01

# XGMII control characters and their 7-bit 10GBASE-R control codes.
XGMII_IDLE, XGMII_START, XGMII_TERMINATE, XGMII_ERROR = 0x07, 0xFB, 0xFD, 0xFE
CODE_IDLE, CODE_ERROR = 0x00, 0x1E

# Block types (802.3 figure 49-7).
TYPE_CTRL      = 0x1E   # Eight control codes.
TYPE_START_0   = 0x78   # /S/ in lane 0, seven data bytes.
TYPE_START_4   = 0x33   # Four control codes, /S/ in lane 4, three data bytes.
TYPE_OS_START  = 0x66   # An ordered set, /S/ in lane 4.
TYPE_ORDERED   = (0x2D, 0x4B, 0x55)
TYPE_TERMINATE = (0x87, 0x99, 0xAA, 0xB4, 0xCC, 0xD2, 0xE1, 0xFF)   # /T/ in lane 0..7.

SCRAMBLER_TAPS = (39, 58)   # G(x) = 1 + x^39 + x^58 (49.2.6).


def _lane(value, i):
    return value[8*i:8*i + 8]


def reverse_bits(value):
    return Cat(*[value[len(value) - 1 - i] for i in range(len(value))])

# Encoder ------------------------------------------------------------------------------------------

class BaseREncoder(LiteXModule):
    """XGMII column (tx_data, tx_ctl) to a block (header, payload), registered."""
    def __init__(self):
        self.tx_data = Signal(64)
        self.tx_ctl  = Signal(8)
        # From reset, an idle block: the line never carries an invalid sync header.
        self.header  = Signal(2, reset=SYNC_CTRL)
        self.payload = Signal(64, reset=TYPE_CTRL)
        self.bad     = Signal()   # The column had no block: an error block went instead.

        # # #

        data, ctl = self.tx_data, self.tx_ctl
        is_char  = lambda i, char: ctl[i] & (_lane(data, i) == char)
        # Lane i is an idle or an error (the only control codes the transmitter sends).
        is_code  = [is_char(i, XGMII_IDLE) | is_char(i, XGMII_ERROR) for i in range(8)]
        code     = [Mux(_lane(data, i) == XGMII_IDLE, Constant(CODE_IDLE, 7), Constant(CODE_ERROR, 7)) for i in range(8)]
        codes_ok = lambda lanes: reduce(and_, [is_code[i] for i in lanes], 1)

        header, payload, bad = Signal(2), Signal(64), Signal()
        cases = [
            # (condition, payload) in priority order; data columns first.
            (ctl == 0xFF) & codes_ok(range(8)),
                Cat(Constant(TYPE_CTRL, 8), *code),
            (ctl == 0x01) & is_char(0, XGMII_START),
                Cat(Constant(TYPE_START_0, 8), data[8:]),
            (ctl == 0x1F) & is_char(4, XGMII_START) & codes_ok(range(4)),
                Cat(Constant(TYPE_START_4, 8), *code[:4], Constant(0, 4), data[40:]),
        ]
        for k, block_type in enumerate(TYPE_TERMINATE):
            cases += [
                (ctl == ((0xFF << k) & 0xFF)) & is_char(k, XGMII_TERMINATE) & codes_ok(range(k + 1, 8)),
                Cat(Constant(block_type, 8), *([data[:8*k]] if k else []), *([Constant(0, 7 - k)] if k < 7 else []),
                    *code[k + 1:]),
            ]
        error_block = Cat(Constant(TYPE_CTRL, 8), *[Constant(CODE_ERROR, 7)]*8)
        chain = If(ctl == 0, header.eq(SYNC_DATA), payload.eq(data))
        for cond, block in zip(cases[0::2], cases[1::2]):
            chain = chain.Elif(cond, header.eq(SYNC_CTRL), payload.eq(block))
        self.comb += chain.Else(header.eq(SYNC_CTRL), payload.eq(error_block), bad.eq(1))
        self.sync += [self.header.eq(header), self.payload.eq(payload), self.bad.eq(bad)]

# Scrambler ----------------------------------------------------------------------------------------

class BaseRScrambler(LiteXModule):
    """Self-synchronising scrambler of the payload, bit 0 first: out[i] = in[i] ^ out[i-39] ^
    out[i-58] (the previous word's bits where i-39 or i-58 is negative). Registered."""
    def __init__(self):
        self.sink   = Signal(64)
        self.source = Signal(64)

        # # #

        prev, out = self.source, []
        s = lambda j: out[j] if j >= 0 else prev[64 + j]
        for i in range(64):
            out.append(self.sink[i] ^ s(i - SCRAMBLER_TAPS[0]) ^ s(i - SCRAMBLER_TAPS[1]))
        self.sync += self.source.eq(Cat(*out))


class BaseRDescrambler(LiteXModule):
    """Its inverse: out[i] = in[i] ^ in[i-39] ^ in[i-58]. Registered."""
    def __init__(self):
        self.sink   = Signal(64)
        self.source = Signal(64)

        # # #

        prev = Signal(64)
        r = lambda j: self.sink[j] if j >= 0 else prev[64 + j]
        self.sync += [
            prev.eq(self.sink),
            self.source.eq(Cat(*[self.sink[i] ^ r(i - SCRAMBLER_TAPS[0]) ^ r(i - SCRAMBLER_TAPS[1])
                                 for i in range(64)])),
        ]

# Block lock ---------------------------------------------------------------------------------------

class BaseRBlockLock(LiteXModule):
    """Block lock (802.3 49.2.13.2.2): 64 valid sync headers in a row lock; 16 invalid ones
    within 64 unlock. While unlocked, every invalid header slips the gearbox by a bit (`slip`,
    one cycle), then the next `slip_wait` headers are ignored (the GTY needs at least 32 cycles
    between slips before its words show the new alignment)."""
    def __init__(self, slip_wait=64):
        self.header = Signal(2)
        self.lock   = Signal()
        self.slip   = Signal()

        # # #

        valid  = Signal()
        count  = Signal(6)
        bad    = Signal(5)
        wait   = Signal(max=slip_wait + 1)
        self.comb += valid.eq(self.header[0] ^ self.header[1])
        slip = [self.slip.eq(1), count.eq(0), bad.eq(0), wait.eq(slip_wait)]
        self.sync += [
            self.slip.eq(0),
            If(wait != 0,
                wait.eq(wait - 1)
            ).Elif(~self.lock,
                If(valid,
                    count.eq(count + 1),
                    If(count == 63, self.lock.eq(1), bad.eq(0))
                ).Else(*slip)
            ).Else(
                count.eq(count + 1),
                If(~valid,
                    bad.eq(bad + 1),
                    If(bad == 15, self.lock.eq(0), *slip)
                ).Elif(count == 63,
                    bad.eq(0)
                )
            )
        ]

# Decoder ------------------------------------------------------------------------------------------

class BaseRDecoder(LiteXModule):
    """A block (header, payload) to an XGMII column (rx_data, rx_ctl), registered. Not `lock`:
    idle columns."""
    def __init__(self):
        self.header  = Signal(2)
        self.payload = Signal(64)
        self.lock    = Signal()
        self.rx_data = Signal(64)
        self.rx_ctl  = Signal(8)
        self.bad     = Signal()   # An invalid block, delivered as an error column.

        # # #

        payload = self.payload
        block_type = payload[:8]
        data, ctl, bad = Signal(64), Signal(8), Signal()
        char = lambda c: Constant(c, 8)

        def code_lanes(offset, lanes):
            # Lanes from 7-bit codes packed from bit `offset`: idle, else error (and bad).
            out = []
            for n, i in enumerate(lanes):
                c = payload[offset + 7*n:offset + 7*n + 7]
                out.append(_lane(data, i).eq(Mux(c == CODE_IDLE, XGMII_IDLE, XGMII_ERROR)))
                out.append(If((c != CODE_IDLE) & (c != CODE_ERROR), bad.eq(1)))
            return out

        idle = [data.eq(Replicate(char(XGMII_IDLE), 8)), ctl.eq(0xFF)]
        error = [data.eq(Replicate(char(XGMII_ERROR), 8)), ctl.eq(0xFF)]
        start_4 = [ctl.eq(0x1F), _lane(data, 4).eq(XGMII_START), data[40:].eq(payload[40:])]
        cases = {
            TYPE_CTRL:     [ctl.eq(0xFF), *code_lanes(8, range(8))],
            TYPE_START_0:  [ctl.eq(0x01), data.eq(Cat(char(XGMII_START), payload[8:]))],
            TYPE_START_4:  [*start_4, *code_lanes(8, range(4))],
            TYPE_OS_START: [*start_4, data[:32].eq(Replicate(char(XGMII_IDLE), 4))],
            **{t: idle for t in TYPE_ORDERED},
            "default":     [*error, bad.eq(1)],
        }
        for k, t in enumerate(TYPE_TERMINATE):
            cases[t] = [ctl.eq((0xFF << k) & 0xFF), *([data[:8*k].eq(payload[8:8 + 8*k])] if k else []),
                        _lane(data, k).eq(XGMII_TERMINATE), *code_lanes(15 + 7*k, range(k + 1, 8))]
        self.comb += [
            If(~self.lock,
                *idle
            ).Elif(self.header == SYNC_DATA,
                data.eq(payload), ctl.eq(0)
            ).Elif(self.header == SYNC_CTRL,
                Case(block_type, cases)
            ).Else(*error, bad.eq(1))
        ]
        self.sync += [self.rx_data.eq(data), self.rx_ctl.eq(ctl), self.bad.eq(bad & self.lock)]

# PCS ----------------------------------------------------------------------------------------------

class BaseRPCS(LiteXModule):
    """The PCS between XGMII `pads` (tx_data, tx_ctl, rx_data, rx_ctl; the transmit half in
    eth_tx, the receive half in eth_rx) and a gearbox transceiver's words (tx_header,
    tx_payload, rx_header, rx_payload, rx_slip; as the transceiver sends them, bit-reversed).

    `rx_lock`: block lock; `tx_bad_blocks`, `rx_bad_blocks`: columns sent as error blocks, blocks
    received invalid (32-bit, saturating; in eth_tx and eth_rx)."""
    def __init__(self, pads):
        self.tx_header  = Signal(2)
        self.tx_payload = Signal(64)
        self.rx_header  = Signal(2)
        self.rx_payload = Signal(64)
        self.rx_slip    = Signal()
        self.rx_lock    = Signal()
        self.tx_bad_blocks = Signal(32)
        self.rx_bad_blocks = Signal(32)

        # # #

        # Transmit.
        encoder   = ClockDomainsRenamer("eth_tx")(BaseREncoder())
        scrambler = ClockDomainsRenamer("eth_tx")(BaseRScrambler())
        self.encoder, self.scrambler = encoder, scrambler
        header_d = Signal(2, reset=SYNC_CTRL)   # The header, a cycle later with its scrambled payload.
        self.comb += [
            encoder.tx_data.eq(pads.tx_data),
            encoder.tx_ctl.eq(pads.tx_ctl),
            scrambler.sink.eq(encoder.payload),
            self.tx_header.eq(reverse_bits(header_d)),
            self.tx_payload.eq(reverse_bits(scrambler.source)),
        ]
        self.sync.eth_tx += [
            header_d.eq(encoder.header),
            If(encoder.bad & (self.tx_bad_blocks != 2**32 - 1), self.tx_bad_blocks.eq(self.tx_bad_blocks + 1)),
        ]

        # Receive.
        lock        = ClockDomainsRenamer("eth_rx")(BaseRBlockLock())
        descrambler = ClockDomainsRenamer("eth_rx")(BaseRDescrambler())
        decoder     = ClockDomainsRenamer("eth_rx")(BaseRDecoder())
        self.block_lock, self.descrambler, self.decoder = lock, descrambler, decoder
        rx_header, header_d = Signal(2), Signal(2)
        self.comb += [
            rx_header.eq(reverse_bits(self.rx_header)),
            lock.header.eq(rx_header),
            self.rx_slip.eq(lock.slip),
            self.rx_lock.eq(lock.lock),
            descrambler.sink.eq(reverse_bits(self.rx_payload)),
            decoder.header.eq(header_d),
            decoder.payload.eq(descrambler.source),
            decoder.lock.eq(lock.lock),
            pads.rx_data.eq(decoder.rx_data),
            pads.rx_ctl.eq(decoder.rx_ctl),
        ]
        self.sync.eth_rx += [
            header_d.eq(rx_header),
            If(decoder.bad & (self.rx_bad_blocks != 2**32 - 1), self.rx_bad_blocks.eq(self.rx_bad_blocks + 1)),
        ]
