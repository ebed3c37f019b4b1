#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""10G Ethernet transmitter: frames to the 64-bit XGMII TX lanes (IEEE 802.3 clause 46).

    sink ─► XGMIIColumns ─► register ─► lane alignment + deficit idle count ─► register ─► tx_data/tx_ctl
            preamble, padding,            /S/ in lane 0 or 4, idle columns,
            FCS, /T/ (frame-aligned)      average gap 12 bytes, never below 9

XGMIIColumns turns a frame into columns as if its /S/ were in lane 0: the preamble column
(/S/, six 0x55, 0xD5), the frame's words (zeros up to 60 bytes), the FCS right behind the last
byte and /T/ right behind the FCS, idles after it in its column; while its register is empty, a
frame waiting at the sink is offered as its preamble column at once (from an idle link, /S/ is on
the pins one cycle after the frame's first word). XGMIITransmitter puts those
columns on the lanes, shifted by four lanes when the frame starts in lane 4 (each column is then
the upper half of the previous one and the lower half of this one), and holds the gap.

The gap (/T/ included, up to the next /S/) follows the deficit idle count of 802.3 46.3.1.4:
/S/ may only go in lane 0 or 4, so the 12-byte gap is rounded to a multiple of four lanes,
down (idles deleted, counted in the DIC) while the count stays at most 3, else up (idles
inserted, taken off the count). Every gap is 9 to 15 bytes, and over any run of back-to-back
frames the gaps add up to 12 per frame within 3 bytes: the UDP payload rate is
payload/(payload + 66) x 1.25 GB/s, with no idle column beyond those the gap needs.

The sink takes frames without preamble and FCS, 8 bytes a word, `last_be` one-hot on the last
valid byte of the last word (as LiteEth's 64-bit streams). `sink.ready` falls only for the
preamble column, padding, an FCS that does not fit in the last word, and the gap. A frame's words
must come without a gap (a store-and-forward FIFO in front guarantees it): a column the sink
cannot fill inside a frame goes out as error characters (/E/ in every lane, so the receiver
drops the frame) and is counted in `underruns`.
"""

from migen import *

from litex.gen import *

from litex.soc.interconnect import stream

from liteeth.common import eth_phy_description
from liteeth.mac.crc import LiteEthMACCRC32

IDLE, START, TERMINATE, ERROR = 0x07, 0xFB, 0xFD, 0xFE
MIN_FRAME = 60   # Bytes before the FCS (64 with it).

# A frame-aligned XGMII column: lane i is data[8i:8i+8] and ctl[i]; `first` marks the preamble
# column, `last` the column with /T/, in lane `tlane`.
column_description = [("data", 64), ("ctl", 8), ("tlane", 3)]


def lanes(chars):
    """(data, ctl) of a column from 8 lanes, each a data byte (a Value) or ("c", code)."""
    data = [Constant(c[1], 8) if isinstance(c, tuple) else c for c in chars]
    ctl = sum(1 << i for i, c in enumerate(chars) if isinstance(c, tuple))
    return Cat(*data), Constant(ctl, 8)


def byte(value, i):
    return value[8*i:8*i + 8]


IDLE_COLUMN     = lanes([("c", IDLE)]*8)
ERROR_COLUMN    = lanes([("c", ERROR)]*8)
PREAMBLE_COLUMN = lanes([("c", START)] + [Constant(0x55, 8)]*6 + [Constant(0xD5, 8)])


def last_word_column(data, fcs, n):
    """The column of a frame's last word with n valid bytes (1..8): the bytes, then as much of
    the FCS as fits, then (n <= 3) /T/ and idles."""
    chars = [byte(data, i) for i in range(n)] + [byte(fcs, i) for i in range(min(4, 8 - n))]
    if n <= 3:
        chars += [("c", TERMINATE)] + [("c", IDLE)]*(3 - n)
    return lanes(chars)


def spill_column(fcs_rest, m):
    """The column after a last word of 4 + m bytes: the FCS's last m bytes, /T/, idles."""
    return lanes([byte(fcs_rest, i) for i in range(m)] + [("c", TERMINATE)] + [("c", IDLE)]*(7 - m))


class XGMIIColumns(LiteXModule):
    """Frames (eth_phy_description(64), no preamble or FCS) to frame-aligned XGMII columns
    (column_description), one per cycle while the sink has words; registered output, except the
    preamble column of a frame that finds the register empty."""
    def __init__(self):
        self.sink   = sink   = stream.Endpoint(eth_phy_description(64))
        self.source = source = stream.Endpoint(column_description)

        # # #

        # States, one flip-flop each: waiting for a frame (then the preamble column), its words,
        # padding words, the column with the FCS's rest.
        pre   = Signal(reset=1)
        dat   = Signal()
        pad   = Signal()
        spill = Signal()
        count = Signal(4)        # Words of the frame taken, up to 8 (60 bytes need 7.5).
        rest  = Signal(32)       # The FCS bytes left for the spill column, from byte 0.
        rest_m = Signal(3)       # How many (0..4).

        # The output register; while it is empty, a frame waiting at the sink is offered as its
        # preamble column straight away (one cycle less from an idle link to /S/), and the
        # frame's first word is taken when that column is.
        r_valid, r_first, r_last = Signal(), Signal(), Signal()
        r_data, r_ctl, r_tlane = Signal(64), Signal(8), Signal(3)
        direct = Signal()        # The preamble column goes out from the sink, not the register.
        self.comb += [
            If(r_valid,
                source.valid.eq(1), source.first.eq(r_first), source.last.eq(r_last),
                source.data.eq(r_data), source.ctl.eq(r_ctl), source.tlane.eq(r_tlane),
            ).Else(
                source.valid.eq(pre & sink.valid), source.first.eq(1),
                Cat(source.data, source.ctl).eq(Cat(*PREAMBLE_COLUMN)),
            ),
            direct.eq(~r_valid & pre & sink.valid & source.ready),
        ]
        load = Signal()          # The output register takes a column.
        in_frame = Signal()      # The sink's words are being taken.
        self.comb += [
            load.eq(~r_valid | source.ready),
            in_frame.eq(dat | direct),
            sink.ready.eq(in_frame & load),
        ]

        # The word to send: the sink's (bytes after the last valid one zeroed) or padding.
        valid_lanes = Signal(8)  # Byte i of the sink's word is part of the frame.
        self.comb += [valid_lanes[i].eq(~sink.last | (sink.last_be[i:] != 0)) for i in range(8)]
        w_data  = Signal(64)
        w_be    = Signal(8)      # One-hot: the word's last byte for the CRC (bit 7: all 8).
        w_end   = Signal()       # The FCS follows this word.
        w_short = Signal()       # The sink's frame ends in words 0-6: padding words follow.
        to_60   = Signal()       # It ends in word 7 before byte 4: zeros up to byte 4.
        self.comb += [
            w_short.eq(~pad & sink.last & ~count[3] & (count != 7)),
            to_60.eq(~count[3] & (count == 7) & (sink.last_be[3:] == 0)),
            If(pad,
                w_data.eq(0),
                w_end.eq(count == 7),
                w_be.eq(Mux(count == 7, 0x08, 0x80)),
            ).Else(
                w_data.eq(sink.data & Cat(*[Replicate(valid_lanes[i], 8) for i in range(8)])),
                w_end.eq(sink.last & ~w_short),
                w_be.eq(Mux(w_end, Mux(to_60, 0x08, sink.last_be), 0x80)),
            ),
        ]
        take = Signal()
        self.comb += take.eq(load & (pad | (in_frame & sink.valid)))

        # CRC-32 over the words: LiteEth's (a 64-bit register step and one engine per byte count
        # for the last word); `value` is the FCS with the current word folded in.
        self.crc = crc = LiteEthMACCRC32(64)
        self.comb += [
            crc.data.eq(w_data),
            crc.be.eq(w_be),
            crc.ce.eq(take),
            crc.reset.eq(pre & ~direct),  # Never in a frame's first cycle of `pre` (r_valid).
        ]

        ends = [(w_be[n - 1], n) for n in range(1, 9)]
        self.sync += [
            If(load,
                r_valid.eq(0),
                If(pre & sink.valid & ~direct,
                    r_valid.eq(1), r_first.eq(1), r_last.eq(0),
                    Cat(r_data, r_ctl).eq(Cat(*PREAMBLE_COLUMN)),
                    pre.eq(0), dat.eq(1),
                ),
                If(take,
                    r_valid.eq(1), r_first.eq(0), r_last.eq(0),
                    r_data.eq(w_data), r_ctl.eq(0),
                    If(pre, pre.eq(0), dat.eq(1)),
                    If(~count[3], count.eq(count + 1)),
                    If(w_short, dat.eq(0), pad.eq(1)),
                    If(w_end,
                        dat.eq(0), pad.eq(0), count.eq(0),
                        *[If(be, Cat(r_data, r_ctl).eq(Cat(*last_word_column(w_data, crc.value, n))))
                          for be, n in ends],
                        If(w_be[:3] != 0,
                            pre.eq(1), r_last.eq(1),
                            *[If(be, r_tlane.eq(n + 4)) for be, n in ends if n <= 3],
                        ).Else(
                            spill.eq(1),
                            *[If(be, rest.eq(crc.value >> 8*(8 - n)), rest_m.eq(n - 4))
                              for be, n in ends if n >= 4],
                        ),
                    ),
                ),
                If(spill,
                    r_valid.eq(1), r_first.eq(0), r_last.eq(1), r_tlane.eq(rest_m),
                    Case(rest_m, {m: Cat(r_data, r_ctl).eq(Cat(*spill_column(rest, m)))
                                  for m in range(5)}),
                    spill.eq(0), pre.eq(1),
                ),
            ),
        ]


class XGMIITransmitter(LiteXModule):
    """Frames (eth_phy_description(64), no preamble or FCS) to XGMII TX (`pads.tx_data` 64 bits,
    `pads.tx_ctl` 8 bits, one column per cycle at 156.25 MHz), both from flip-flops.
    `underruns` counts columns sent as /E/ because a frame's next word was missing."""
    def __init__(self, pads):
        self.sink      = sink = stream.Endpoint(eth_phy_description(64))
        self.underruns = Signal(32)

        # # #

        self.columns = columns = XGMIIColumns()
        self.comb += sink.connect(columns.sink)
        a = columns.source

        # The output registers, idle at reset.
        tx_data = Signal(64, reset=0x0707070707070707)
        tx_ctl  = Signal(8,  reset=0xFF)
        self.comb += [pads.tx_data.eq(tx_data), pads.tx_ctl.eq(tx_ctl)]

        # State.
        infr    = Signal()        # Sending a frame's columns.
        shifted = Signal()        # The frame started in lane 4: lanes 0-3 come from `hi`.
        flush   = Signal()        # The frame's /T/ is in `hi`: one more column.
        hi_data = Signal(32)      # The upper half of the previous frame-aligned column.
        hi_ctl  = Signal(4)
        hi_tlane = Signal(3)      # Its /T/ lane + 4 (frame-aligned), for the flush column.
        since   = Signal(2, reset=3)  # Columns since the one with /T/, up to 3.
        t_lane  = Signal(3)       # Lane of the last /T/.
        earliest = Signal(3)      # Earliest /S/ in half columns from the start of /T/'s column.
        dic     = Signal(2)       # Deficit idle count: idle bytes deleted and not yet made up.

        # The column to send, and whether it holds /T/ (in lane `t_now`).
        col_data, col_ctl = Signal(64), Signal(8)
        t_here, t_now = Signal(), Signal(3)
        start, start_hi = Signal(), Signal()   # A frame starts in lane 0 / lane 4.
        shifted_col = (Cat(hi_data, a.data[:32]), Cat(hi_ctl, a.ctl[:4]))
        self.comb += [
            Cat(col_data, col_ctl).eq(Cat(*IDLE_COLUMN)),
            If(infr,
                If(a.valid,
                    a.ready.eq(1),
                    If(shifted,
                        col_data.eq(shifted_col[0]), col_ctl.eq(shifted_col[1]),
                        If(a.last & (a.tlane < 4), t_here.eq(1), t_now.eq(a.tlane + 4)),
                    ).Else(
                        col_data.eq(a.data), col_ctl.eq(a.ctl),
                        If(a.last, t_here.eq(1), t_now.eq(a.tlane)),
                    ),
                ).Else(
                    Cat(col_data, col_ctl).eq(Cat(*ERROR_COLUMN)),
                ),
            ).Elif(flush,
                col_data.eq(Cat(hi_data, IDLE_COLUMN[0][32:])), col_ctl.eq(Cat(hi_ctl, Constant(0xF, 4))),
                t_here.eq(1), t_now.eq(hi_tlane - 4),
            ).Elif(a.valid & a.first,
                # Half column 2*since is lane 0 of this column, 2*since + 1 lane 4.
                If(Cat(C(0, 1), since) >= earliest,
                    start.eq(1), a.ready.eq(1),
                    col_data.eq(a.data), col_ctl.eq(a.ctl),
                ).Elif(Cat(C(1, 1), since) >= earliest,
                    start_hi.eq(1), a.ready.eq(1),
                    col_data.eq(Cat(IDLE_COLUMN[0][:32], a.data[:32])),
                    col_ctl.eq(Cat(Constant(0xF, 4), a.ctl[:4])),
                ),
            ),
        ]

        # Deficit idle count. At /T/: the next /S/ goes in the half column at or below 12 bytes
        # after /T/ (deleting up to 3 idles) while the count stays at most 3, else in the one
        # above (inserting). At /S/: the count grows by the idles deleted (12 - gap) and shrinks
        # by those inserted, not below 0 (a gap longer than 15 bytes makes it 0).
        below = Signal(2)
        self.comb += below.eq(t_now[:2])
        sum_dic = Signal(3)
        self.comb += sum_dic.eq(dic + below)
        credit, used = Signal(5), Signal(5)   # dic + 12 + t_lane; 4 x the start's half column.
        self.comb += [
            credit.eq(dic + 12 + t_lane),
            used.eq(Cat(C(0, 2), start_hi, since)),
        ]

        self.sync += [
            Cat(tx_data, tx_ctl).eq(Cat(col_data, col_ctl)),
            If(infr & ~a.valid, self.underruns.eq(self.underruns + 1)),
            If(a.valid & a.ready,
                hi_data.eq(a.data[32:]), hi_ctl.eq(a.ctl[4:]), hi_tlane.eq(a.tlane),
            ),
            If(start | start_hi,
                infr.eq(1), shifted.eq(start_hi),
                dic.eq(Mux(used <= credit, credit - used, 0)),
            ),
            If(infr & a.valid & a.last,
                infr.eq(0),
                flush.eq(shifted & (a.tlane >= 4)),
            ),
            If(flush, flush.eq(0)),
            If(t_here,
                since.eq(1),
                t_lane.eq(t_now),
                earliest.eq(t_now[2] + 3 + ((below != 0) & (sum_dic > 3))),
            ).Elif(~infr & ~flush & (since != 3),
                since.eq(since + 1),
            ),
        ]
