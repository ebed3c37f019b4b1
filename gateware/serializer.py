#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""DAQ serializer: round-robin over the channels' complete datagrams, each sent as its DAQ header
(ethdaq.wire.daqformat) and then its samples, as UDP user datagrams for the framer.

The serializer's parts are module-level functions of the serializer rather than methods: Migen
names a signal after the Python frames above its creation, and a method's frame would add a level
to the names in the generated Verilog. The state machine's signals, shared by its parts, are
declared together (`_declare_fsm_signals`) on one namespace; each part reads its own from it.

A few signals are named explicitly with a name other than their variable's (`name=`), and a few
are created in the constructor rather than in the part that drives them: so the generated Verilog
keeps the names it has. Migen's tracer names a closure variable's signal after its neighbour in
the code object on Python 3.11 (pop_arm is "pending", d_pop "self"), and a signal's place in the
names' hierarchy follows the function that creates it (`stale_sel`, named "source", shares a level
with `source`).
"""

from types import SimpleNamespace

from migen import *

from litex.gen import *

from litex.soc.interconnect import stream

from liteeth.common import eth_udp_user_description

from ethdaq.gateware.compare import at_most
from ethdaq.gateware.daqchannel import RUN_TAG_BITS, descriptor_layout
from ethdaq.gateware.framer import field_bytes, mux_tree
from ethdaq.wire import daqformat

# Helpers ------------------------------------------------------------------------------------------

def header_bytes(fields):
    """The header as a list of 8-bit Migen expressions, in wire order, from a dict of field
    name -> value (Signal or int). Offsets and sizes come from daqformat.FIELDS."""
    out = field_bytes([(fields.get(f.name, 0), f.size) for f in daqformat.FIELDS])
    assert len(out) == daqformat.HEADER_LEN
    return out


# The descriptor's wide fields: at 8 bits the header takes them from the head descriptor, not `desc`.
HEAD_FIELDS = ("timestamp", "dropped")


def _is_stale(age):
    return (age != 0) & ~age[-1]

# Serializer ---------------------------------------------------------------------------------------

class Serializer(LiteXModule):
    """Round-robin over channels with a complete datagram: its DAQ header, then its samples (MSB
    first), `dw` bits per cycle. Runs in one domain with the channels' read sides.

    Built for the ECP5 transmit clock (docs/results.md, "ECP5 timing of the transmit path"): what
    the state machine decides on (last header word, last sample, next channel, stale datagram,
    rate-limit gap) is a register set a cycle or more ahead, not a comparison in the same cycle.
    `source` wants a registered `ready` (TXPath's data_buf)."""
    def __init__(self, channels, sample_width, src_port, dw=8, with_sent=True):
        nchannels    = len(channels)
        sample_bytes = sample_width//8
        packed       = channels[0].packed
        spw          = channels[0].spw
        nb           = dw//8
        assert daqformat.HEADER_LEN % nb == 0
        self.source   = source = stream.Endpoint(eth_udp_user_description(dw))
        self.dst_ip   = Signal(32)
        self.dst_port = Signal(16)
        self.gap      = Signal(32)
        self.run      = Signal(32)  # Current run: datagrams of earlier runs are discarded, counted.
        self.underrun = Signal(32)
        self.stale    = Signal(32)
        self.sent     = Signal(64)  # Datagrams sent (not those discarded as stale), if `with_sent`.
        self.sent_event = Signal()  # A datagram of channel `sel` with `source.length` bytes went out.
        self.sel      = Signal(max=max(nchannels, 2))

        # # #

        # Data-Path.
        late = nb == 1  # `desc` is copied a cycle after `load` (see _add_descriptor_fetch).
        heads, desc, samples = _add_heads(self, channels, late)
        sel      = self.sel
        run_hdr  = Signal(32)  # The datagram's run number, from its descriptor's tag (_add_stale_check).
        hwords   = daqformat.HEADER_LEN//nb
        assert hwords >= 5  # The registers derived from `desc` below are right from the header's 4th cycle on.
        self.comb += [
            source.src_port.eq(src_port),
            source.dst_port.eq(self.dst_port),
            source.ip_address.eq(self.dst_ip),
        ]

        # Control signals of the state machine (combinational, from registers).
        load     = Signal()  # Copy the head descriptor of channel `load_sel` into `desc`.
        load_sel = Signal(max=max(nchannels, 2))
        h_adv    = Signal()  # A header word goes out.
        w_init   = Signal()  # Start counting the datagram's buffer entries (SAMPLES, DISCARD).
        pop_arm  = Signal(nchannels, name="pending")  # Per channel: a sample word going out now pops its head buffer.
        d_pop    = Signal(name="self")            # DISCARD pops the head buffer of channel `sel`.
        # Narrow per-channel pop enables: a registered "armed" and the (registered) ready of
        # data_buf, so the head buffers' enables are not at the end of the state machine's logic.
        self.comb += [w.ready.eq((pop_arm[i] & source.ready) | (d_pop & (sel == i))) for i, (d, w) in enumerate(heads)]

        pop_r, pop_ch, pop_rr, pop_ch_r, load_d, load_dd, count_l = _add_descriptor_fetch(
            self, heads, desc, load, load_sel, late, sample_bytes)
        seq_next = _add_sequence_numbers(self, desc, nchannels, dw, late, load, load_sel, pop_r, pop_ch, pop_rr, pop_ch_r)
        fields = dict(magic=daqformat.MAGIC, version=daqformat.VERSION, header_len=daqformat.HEADER_LEN,
                      stream_id=sel, flags=desc.flags, sample_bits=sample_width)
        if late:
            # The wide fields from the chosen channel's head descriptor (on its FIFO's output
            # until the pop) into the header shift register; seq and run follow (_add_header_shift).
            fields.update({name: Array(getattr(d, name) for d, w in heads)[pop_ch] for name in HEAD_FIELDS},
                          sample_count=count_l)
        else:
            fields.update({name: getattr(desc, name) for name in HEAD_FIELDS},
                          seq=desc.seq, sample_count=desc.count, run=run_hdr)
        hb       = header_bytes(fields)
        header   = [Cat(*hb[i*nb:(i + 1)*nb]) for i in range(hwords)]  # Lane 0 first on the wire.
        others, any_r, nxt_r, nxt_other_r = _add_arbiter(self, heads, pop_r, pop_ch)
        # Per channel, registered: its head datagram's age in runs; "the chosen channel's head is of
        # an earlier run", registered at the choice; then whether the datagram being sent is.
        self.ages = ages = [Signal(RUN_TAG_BITS, name=f"age{i}") for i in range(nchannels)]
        stale_sel = Signal(name="source")
        stale_now = Signal()
        _add_stale_check(self, heads, desc, ages, stale_sel, stale_now, load_sel, load_d, load_dd, run_hdr)
        nwords_r, nw_zero, nw_one, nbeats_r, nb_one = _add_lengths(self, desc, packed, spw, sample_bytes)

        # Control-Path.
        fsm = SimpleNamespace(
            ready=source.ready, load=load, load_sel=load_sel, h_adv=h_adv, w_init=w_init, pop_arm=pop_arm,
            d_pop=d_pop, others=others, any_r=any_r, nxt_r=nxt_r, nxt_other_r=nxt_other_r, stale_now=stale_now)
        _declare_fsm_states(fsm)
        if nb == 1:
            _add_header_shift(self, fsm, hb, header, hwords, pop_r, pop_rr, seq_next, run_hdr)
        _declare_fsm_signals(fsm, hwords, len(nbeats_r), len(nwords_r))
        _add_fsm(self, fsm, samples, packed, sample_bytes)
        _add_header_position(self, fsm, hwords, nw_zero)
        _add_sample_count(self, fsm, nbeats_r, nb_one)
        _add_discard_count(self, fsm, nwords_r, nw_one, nw_zero)
        _add_gap(self, fsm)
        _add_statistics(self, fsm, samples, with_sent)
        _add_output(self, fsm, desc, samples, header, packed, spw, nb, sample_bytes)

# Data-Path parts ----------------------------------------------------------------------------------

def _add_heads(ser, channels, late):
    # Each channel's head word is registered (a full-throughput buffer with registered valid
    # and ready: its RAM output and read pointer then meet registers, not the byte mux and
    # the FSM). Descriptors are not: the one being sent is copied into `desc` when its channel
    # is chosen and its FIFO entry is released (a registered pop) at once, so one register
    # serves all channels (a buffer per channel cost 2048 flip-flops and 1000 LUTs at 4).
    # At 8 bits `desc` holds only what the state machine reads (count, flags, run tag): the
    # header's wide fields go from the head descriptor straight into the header shift register.
    heads = []
    for i, ch in enumerate(channels):
        w = stream.Buffer([("data", ch.word_width)], pipe_valid=True, pipe_ready=True)
        setattr(ser, f"word_reg{i}", w)
        ser.comb += ch.source.connect(w.sink)
        heads.append((ch.desc, w.source))
    sel      = ser.sel
    layout   = descriptor_layout(len(channels[0].desc.count)) + [("seq", 64)]
    desc     = Record([f for f in layout if not (late and f[0] in HEAD_FIELDS + ("seq",))], name="d_pop")
    samples  = stream.Endpoint([("data", channels[0].word_width)], name="sample_bytes")
    ser.comb += [
        Case(sel, {i: w.connect(samples, omit={"ready"}) for i, (d, w) in enumerate(heads)}),
    ]
    return heads, desc, samples


def _add_descriptor_fetch(ser, heads, desc, load, load_sel, late, sample_bytes):
    # Choosing a channel pops its head descriptor in the next cycle (registered: the FSM does
    # not reach into the FIFO's read pointer); while that pop is in flight the channel's old
    # head must not count as pending. The head stays on the FIFO's output until the pop, so
    # at 8 bits, where the header's first desc-dependent byte (flags) goes out at the 8th
    # cycle, `desc` is copied in that cycle (and the header's wide fields into the header
    # shift register), by the registered pop rather than by `load` (a wide fan-out at the end
    # of the FSM's logic); at 64 bits the first word holds the flags, so it is copied at
    # `load`. The payload length is needed from the first word on: its sample count is copied
    # at `load`.
    sel      = ser.sel
    nchannels = len(heads)
    pop_r    = Signal(name="pop_arm")
    pop_ch   = Signal(max=max(nchannels, 2))
    pop_rr   = Signal()
    pop_ch_r = Signal(max=max(nchannels, 2))
    load_d   = Signal()  # First cycle of a datagram's header.
    load_dd  = Signal()
    count_l  = Signal.like(desc.count)
    d_load, d_sel = (pop_r, pop_ch) if late else (load, load_sel)
    ser.sync += [
        If(load,
            sel.eq(load_sel),
            count_l.eq(Array(d.count for d, w in heads)[load_sel]),
        ),
        If(d_load,
            Case(d_sel, {i: [getattr(desc, name).eq(getattr(d, name)) for name, _ in descriptor_layout(len(count_l))
                             if hasattr(desc, name) and not (late and name == "count")]
                         for i, (d, w) in enumerate(heads)}),
            # At 8 bits the count is count_l's: the same head's, copied at `load` (its entry
            # stays on the FIFO's output until this pop), without a second multiplexer.
            desc.count.eq(count_l) if late else [],
        ),
        pop_r.eq(load),
        pop_ch.eq(load_sel),
        pop_rr.eq(pop_r),
        pop_ch_r.eq(pop_ch),
        load_d.eq(load),
        load_dd.eq(load_d),
    ]
    ser.comb += ser.source.length.eq(daqformat.HEADER_LEN + (count_l << log2_int(sample_bytes)))
    return pop_r, pop_ch, pop_rr, pop_ch_r, load_d, load_dd, count_l


def _add_sequence_numbers(ser, desc, nchannels, dw, late, load, load_sel, pop_r, pop_ch, pop_rr, pop_ch_r):
    # Sequence numbers, per channel: 0 at FLAG_FIRST, else the channel's previous one + 1 (every
    # descriptor passes here in order, discarded ones too). Ready one cycle after the rest of
    # `desc` (whose flags are loaded by then): the header's seq field starts at byte 8, in the
    # second cycle at the earliest (the 8th at 8 bits).
    assert next(f.offset for f in daqformat.FIELDS if f.name == "seq") >= (8 if late else dw//8)
    s_load, s_sel, commit, commit_ch = (pop_r, pop_ch, pop_rr, pop_ch_r) if late else (load, load_sel, pop_r, pop_ch)
    # The 64-bit increment is split at bit 32 over the two cycles: the low half's (with its
    # carry) as the channel's number is loaded, the high half's at the commit. In one cycle
    # it would be a 64-bit carry chain, about 3 of the eth clock's 8 ns on an ECP5.
    # The channels' numbers are a small RAM (distributed RAM on the ECP5 and 7-series, read
    # asynchronously): no reset needed, as a run's first datagram of each channel is FLAG_FIRST.
    # Kept from AutoCSR, which would put a Memory attribute on the CSR bus (a sys-domain port).
    ser.seqs = seqs = Memory(64, max(nchannels, 2))
    ser.autocsr_exclude = {"seqs"}
    rd = seqs.get_port(async_read=True)
    wr = seqs.get_port(write_capable=True)
    ser.specials += seqs, rd, wr
    seq_lo   = Signal(33)  # The low half + 1, and its carry.
    seq_hi   = Signal(32)
    seq_next = Signal(64)
    ser.comb += [
        seq_next.eq(Mux(desc.flags & daqformat.FLAG_FIRST != 0, 0, Cat(seq_lo[:32], seq_hi + seq_lo[32]))),
        rd.adr.eq(s_sel),
        wr.adr.eq(commit_ch),
        wr.dat_w.eq(seq_next),
        wr.we.eq(commit),
    ]
    ser.sync += [
        If(s_load, seq_lo.eq(rd.dat_r[:32] + 1), seq_hi.eq(rd.dat_r[32:])),
        # At 8 bits the header shift register takes seq_next at the commit (_add_header_shift).
        If(commit, desc.seq.eq(seq_next)) if not late else [],
    ]
    return seq_next


def _add_arbiter(ser, heads, pop_r, pop_ch):
    # Which channel goes next: round robin over the channels with a complete datagram, chosen a
    # cycle ahead of its use.
    sel       = ser.sel
    nchannels = len(heads)
    ser.comb += Case(pop_ch, {i: d.ready.eq(pop_r) for i, (d, w) in enumerate(heads)})
    pending = Signal(nchannels, name="nxt_other")
    ser.comb += pending.eq(Cat(*[d.valid for d, w in heads]) & ~Mux(pop_r, 1 << pop_ch, 0))
    # Round robin: the next channel after `sel` with a complete datagram.
    nxt = Signal(max=max(nchannels, 2))
    ser.comb += nxt.eq(sel)
    for k in reversed(range(1, nchannels + 1)):
        cases = {}
        for s in range(nchannels):
            cases[s] = If(pending[(s + k) % nchannels], nxt.eq((s + k) % nchannels))
        ser.comb += Case(sel, cases)
    # The next channel other than `sel`, so the next datagram can follow the current one's
    # last word without an idle cycle (which the 64-bit path would otherwise show on the wire).
    others   = Signal(nchannels)
    nxt_other = Signal(max=max(nchannels, 2), name="nchannels")
    ser.comb += [others.eq(pending & ~(1 << sel)), nxt_other.eq(sel)]
    for k in reversed(range(1, nchannels)):
        ser.comb += Case(sel, {s: If(pending[(s + k) % nchannels], nxt_other.eq((s + k) % nchannels))
                               for s in range(nchannels)})
    # The choices, registered: they drive the load of `desc` (about 250 flip-flops at 64 bits)
    # and were on the transmit clock's critical path. One cycle old is exact where they are
    # used: a channel stays pending until popped, pops start only at a load, and SELECT and
    # finish() are never within two cycles of a load (a header takes at least 5 cycles; DISCARD
    # at least three), by which time the pop is in `pending`. A channel that just became pending
    # waits one more cycle.
    any_r = Signal()
    nxt_r, nxt_other_r = Signal.like(nxt), Signal.like(nxt_other)
    ser.sync += [
        any_r.eq(pending != 0),
        nxt_r.eq(nxt),
        nxt_other_r.eq(nxt_other),
    ]
    return others, any_r, nxt_r, nxt_other_r


def _add_stale_check(ser, heads, desc, ages, stale_sel, stale_now, load_sel, load_d, load_dd, run_hdr):
    # A datagram of an earlier run can only still be here if its destination never answered
    # ARP; it must not go to the next run's destination. Its age is the run number's low
    # RUN_TAG_BITS against the descriptor's tag; "earlier" is an age of 1..2**(RUN_TAG_BITS-1)-1
    # (modulo 2**RUN_TAG_BITS), so a run number that has not crossed from sys yet cannot make a
    # new datagram look stale. Computed in two registered steps for every channel's head
    # descriptor (its age; then, at the choice, the chosen one's test), so it is ready in a
    # datagram's first header cycle (the head was shown at least a cycle before its load, and
    # stays until the pop after it) from a register, not through a multiplexer behind `sel`;
    # then re-evaluated from `desc` (from the header's fourth cycle on), so a datagram waiting at
    # the first header word for its destination's MAC turns stale when a new run starts.
    # The header's run number is the serializer's less the datagram's (signed) age, both taken
    # in the same cycle: the descriptor's own run, also while the serializer's changes. It is
    # right from the header's fourth cycle on (`desc` copied, age_d, run_hdr).
    age_d     = Signal(RUN_TAG_BITS)
    run_d     = Signal(32)
    stale     = Signal()
    ser.sync += [
        [a.eq(ser.run[:RUN_TAG_BITS] - d.run_tag) for a, (d, w) in zip(ages, heads)],
        stale_sel.eq(Array(_is_stale(a) for a in ages)[load_sel]),   # Read at load_d only.
        age_d.eq(ser.run[:RUN_TAG_BITS] - desc.run_tag),
        run_d.eq(ser.run),
        run_hdr.eq(run_d - Cat(age_d, Replicate(age_d[-1], 32 - RUN_TAG_BITS))),
    ]
    ser.comb += stale_now.eq(Mux(load_d, stale_sel, stale))
    ser.sync += If(load_d, stale.eq(stale_now)).Elif(~load_dd, stale.eq(_is_stale(age_d)))


def _add_lengths(ser, desc, packed, spw, sample_bytes):
    # Registers derived from `desc`, right from the third cycle of the header (`desc` is copied
    # by the pop at 8 bits); used from the header's last word, and in DISCARD's third cycle.
    beat_shift = 0 if packed else log2_int(sample_bytes)  # Output words per buffer entry: 2**beat_shift.
    nwords_r = Signal(len(desc.count))  # Buffer entries (words or samples) of this datagram.
    nw_zero  = Signal()    # ... 0
    nw_one   = Signal()    # ... 1
    nbeats_r = Signal(len(nwords_r) + beat_shift)  # Output words of its samples.
    nb_one   = Signal()                 # ... 1
    ser.sync += [
        nwords_r.eq((desc.count + spw - 1) >> log2_int(spw)),
        nw_zero.eq(desc.count == 0),
        nw_one.eq((desc.count != 0) & ((desc.count - 1)[log2_int(spw):len(desc.count)] == 0)),
        nbeats_r.eq(nwords_r << beat_shift),
        nb_one.eq(nw_one if beat_shift == 0 else 0),
    ]
    return nwords_r, nw_zero, nw_one, nbeats_r, nb_one


def _add_header_shift(ser, fsm, hb, header, hwords, pop_r, pop_rr, seq_next, run_hdr):
    # At 8 bits, the header byte on the output is a register, fetched when the previous one
    # goes out (no multiplexer between the header and data_buf). Bytes 0-7 (constants, the
    # stream id and the flags) come from an 8-way multiplexer; bytes 8-39 (seq and every
    # later field) from a shift register, shifted as they are fetched (from the 8th cycle on):
    # a 40-way multiplexer was five LUTs deep. It is loaded in three steps, each field when it
    # is known: the head descriptor's fields at the pop (its FIFO entry is on the output until
    # then, so `desc` need not hold them), seq at the commit a cycle later, the run number
    # (run_hdr, right from the header's 4th cycle) two cycles after that; all long before the
    # first shift. The shift register shifts a cycle after the fetch, on a registered enable
    # (`owed`), and a fetch while a shift is owed takes the byte after: its 256 clock enables
    # hang on a flip-flop, not on `ready` (7.7 ns on the LFE5U-25F-6). A shift owed by the
    # previous header's last fetch can fall on the pop; the pop's load wins.
    h_adv = fsm.h_adv
    seq_at = next(f.offset for f in daqformat.FIELDS if f.name == "seq")
    assert isinstance(hb[0], Constant) and seq_at == 8
    hidx    = Signal(max=hwords + 1, reset=1)
    hhi     = Signal()  # hidx >= 8
    hword   = Signal(8, reset=hb[0].value)
    hsr     = Signal(8*(hwords - 8))
    run_wait = Signal()  # The cycle after the commit; run_hdr is right the cycle after it.
    run_ld  = Signal()
    run_at  = next(f.offset for f in daqformat.FIELDS if f.name == "run")
    run_bytes = field_bytes([(run_hdr, 4)])
    seq_bytes = field_bytes([(seq_next, 8)])
    owed    = Signal()  # hsr[:8] went out last cycle: shift now.
    ser.sync += [
        run_wait.eq(pop_rr),
        run_ld.eq(run_wait),
        owed.eq(h_adv & hhi),
        If(fsm.h_end,    # Ready for the next header (as _add_header_position's registers).
            hword.eq(hb[0]),
            hidx.eq(1),
            hhi.eq(0),
        ).Elif(h_adv,
            hword.eq(Mux(hhi, Mux(owed, hsr[8:16], hsr[:8]), mux_tree(header[:8], hidx[:3]))),
            hidx.eq(hidx + 1),
            hhi.eq(hhi | (hidx == 7)),
        ),
        If(pop_r,
            hsr.eq(Cat(*hb[8:])),
        ).Elif(owed,
            hsr.eq(hsr[8:]),
        ),
        If(pop_rr,
            hsr[:64].eq(Cat(*seq_bytes)),
        ),
        If(run_ld,
            hsr[8*(run_at - 8):8*(run_at - 4)].eq(Cat(*run_bytes)),
        ),
    ]
    fsm.hdata = hword

# Control-Path parts -------------------------------------------------------------------------------

def _declare_fsm_states(fsm):
    # States, one flip-flop each, and the registered decisions. Every condition below is a
    # small function of registers and of `source.ready` (registered in data_buf).
    fsm.s_select  = Signal(reset=1)
    fsm.s_header  = Signal()
    fsm.s_samples = Signal()
    fsm.s_discard = Signal()
    fsm.s_gap     = Signal()
    fsm.h_end = Signal()  # The header ends: its last word goes out, or it is dropped as stale.


def _declare_fsm_signals(fsm, hwords, nbeats_bits, nwords_bits):
    # The registers the state machine decides on, and its decisions, declared together: the
    # parts below read and drive many of the same ones.
    # Header: position, first word, last word, last word of a datagram without samples.
    fsm.hcount = Signal(max=hwords)
    fsm.hfirst = Signal(reset=1)
    fsm.hlast  = Signal()
    fsm.h_fin  = Signal()
    # Samples: output words left (the current one included), and "this is the last".
    fsm.bleft  = Signal(nbeats_bits)
    fsm.s_fin  = Signal()
    # DISCARD: buffer entries left, "this is the last", "all popped"; its first two cycles;
    # then a pop every other cycle, counted in the cycle after it from a registered "taken"
    # (the selected head buffer's valid then drives one flip-flop, not the counters).
    fsm.wleft  = Signal(nwords_bits)
    fsm.wlast  = Signal()
    fsm.wdone  = Signal()
    fsm.dinit  = Signal()
    fsm.dinit2 = Signal()
    fsm.d_phase = Signal()
    fsm.d_took  = Signal()
    # After the datagram: rate-limit gap, next channel at once, or SELECT (from the same cycle's
    # `gap` and `pending`, so exactly one is set).
    f_gap, f_next, f_sel = Signal(), Signal(), Signal()
    fsm.f_gap, fsm.f_next, fsm.f_sel = f_gap, f_next, f_sel
    fsm.gap_count = Signal(32)
    fsm.g_last    = Signal()  # gap_count <= 1: the gap's last cycle.
    fsm.gap_le1   = Signal()
    fsm.underrun_r = Signal()

    fsm.first_word = Signal()
    fsm.stale_drop = Signal()
    fsm.fin        = Signal()   # The datagram's last word goes out.
    fsm.s_beat     = Signal()   # A sample word goes out.
    fsm.s_init     = Signal()   # The header's last word goes out, samples follow.
    fsm.d_end      = Signal()
    fsm.g_start    = Signal()
    fsm.g_end      = Signal()


def _add_fsm(ser, fsm, samples, packed, sample_bytes):
    # The state machine: its decisions (combinational, from registers) and its states.
    sel, ready, any_r, nxt_r, nxt_other_r, others, stale_now = (
        ser.sel, fsm.ready, fsm.any_r, fsm.nxt_r, fsm.nxt_other_r, fsm.others, fsm.stale_now)
    load, load_sel, h_adv, w_init, pop_arm, d_pop = fsm.load, fsm.load_sel, fsm.h_adv, fsm.w_init, fsm.pop_arm, fsm.d_pop
    s_select, s_header, s_samples, s_discard, s_gap = fsm.s_select, fsm.s_header, fsm.s_samples, fsm.s_discard, fsm.s_gap
    hfirst, hlast, h_fin, s_fin = fsm.hfirst, fsm.hlast, fsm.h_fin, fsm.s_fin
    wdone, dinit, dinit2, d_phase, d_took = fsm.wdone, fsm.dinit, fsm.dinit2, fsm.d_phase, fsm.d_took
    f_gap, f_next, f_sel, g_last = fsm.f_gap, fsm.f_next, fsm.f_sel, fsm.g_last
    first_word, stale_drop, fin, s_beat, s_init = fsm.first_word, fsm.stale_drop, fsm.fin, fsm.s_beat, fsm.s_init
    d_end, g_start, g_end = fsm.d_end, fsm.g_start, fsm.g_end
    # `gap == 0` is registered first: the setting's synchroniser, its 32-bit comparison (a carry
    # chain) and the choice in one cycle are 7.2 - 7.7 ns of an 8 ns period on the 25F boards. The
    # setting is static during a run; a datagram that ends as it changes gets the old setting's
    # choice of gap or none, counted from the new one (a new 0 ends it after two cycles).
    gap_zero = Signal(reset=1)
    ser.sync += [
        gap_zero.eq(ser.gap == 0),
        f_gap.eq(~gap_zero),
        f_next.eq((others != 0) & gap_zero),
        f_sel.eq((others == 0) & gap_zero),
    ]
    if packed:
        blast = C(1)
    else:
        # One byte per cycle, MSB first; a sample is popped after its last byte.
        bcount = fsm.bcount = Signal(max=max(sample_bytes, 2))
        blast  = Signal()
        ser.comb += blast.eq(bcount == sample_bytes - 1)  # At most 2 bits.
        ser.sync += If(s_beat, If(blast, bcount.eq(0)).Else(bcount.eq(bcount + 1)))
    # In SAMPLES next cycle, at a sample's last byte: the next cycle's pop_arm (`sel` does
    # not change while in SAMPLES, and a load leaves it).
    s_samples_n = Signal()
    blast_n     = Signal()
    ser.comb += [
        s_samples_n.eq(s_init | (s_samples & ~(ready & s_fin))),
        blast_n.eq(1 if packed else Mux(s_beat, Mux(blast, sample_bytes == 1, bcount == sample_bytes - 2), blast)),
    ]
    ser.sync += pop_arm.eq(Mux(s_samples_n & blast_n, 1 << sel, 0))
    ser.comb += [
        first_word.eq(s_header & hfirst),
        stale_drop.eq(first_word & stale_now),
        # Not gated by stale_drop (valid is): a stale datagram's header state is dropped with it.
        h_adv.eq(s_header & ready),
        fsm.h_end.eq((h_adv & hlast) | stale_drop),
        s_beat.eq(s_samples & ready),
        fin.eq(ready & ((s_header & h_fin) | (s_samples & s_fin))),
        s_init.eq(h_adv & hlast & ~h_fin),
        load.eq((s_select & any_r) | (fin & f_next)),
        load_sel.eq(Mux(s_select, nxt_r, nxt_other_r)),
        d_end.eq(s_discard & d_phase & wdone),
        d_pop.eq(s_discard & d_phase & ~wdone),
        w_init.eq(s_discard & dinit2),
        g_start.eq(fin & f_gap),
        g_end.eq(s_gap & g_last),
        ser.sent_event.eq(fin),
    ]
    ser.sync += [
        s_select.eq((s_select & ~any_r) | (fin & f_sel) | d_end | g_end),
        s_header.eq(load | (s_header & ~stale_drop & ~(ready & hlast))),
        s_samples.eq(s_samples_n),
        s_discard.eq(stale_drop | (s_discard & ~d_end)),
        s_gap.eq(g_start | (s_gap & ~g_last)),
        dinit.eq(stale_drop),
        dinit2.eq(dinit),
        d_took.eq(d_pop & samples.valid),
        If(w_init, d_phase.eq(1)).Elif(s_discard & ~dinit, d_phase.eq(~d_phase)).Else(d_phase.eq(0)),
    ]


def _add_header_position(ser, fsm, hwords, nw_zero):
    # Where the header is, kept as registers: its first word, its last, and whether it is the
    # datagram's last (no samples). They are made ready for the next header as this one ends
    # (its last word goes out, or it is dropped as stale) and hold outside headers, so `load`,
    # the end of the state machine's logic, does not reach their resets.
    hcount, hfirst, hlast, h_fin = fsm.hcount, fsm.hfirst, fsm.hlast, fsm.h_fin
    ser.sync += [
        If(fsm.h_end,
            hcount.eq(0),
            hfirst.eq(1),
            hlast.eq(0),
            h_fin.eq(0),
        ).Elif(fsm.h_adv,
            hcount.eq(hcount + 1),
            hfirst.eq(0),
            hlast.eq(hcount == hwords - 2),
            h_fin.eq((hcount == hwords - 2) & nw_zero),
        ),
    ]


def _add_sample_count(ser, fsm, nbeats_r, nb_one):
    # The sample words left, and "this is the last", as registers.
    bleft, s_fin = fsm.bleft, fsm.s_fin
    ser.sync += [
        If(fsm.s_init,
            bleft.eq(nbeats_r),
            s_fin.eq(nb_one),
        ).Elif(fsm.s_beat,
            bleft.eq(bleft - 1),
            s_fin.eq(bleft == 2),
        ),
    ]


def _add_discard_count(ser, fsm, nwords_r, nw_one, nw_zero):
    # DISCARD's buffer entries left, and the stale datagrams it discarded (a status counter).
    wleft, wlast, wdone = fsm.wleft, fsm.wlast, fsm.wdone
    ser.sync += [
        If(fsm.w_init,
            wleft.eq(nwords_r),
            wlast.eq(nw_one),
            wdone.eq(nw_zero),
        ).Elif(fsm.d_took,
            wleft.eq(wleft - 1),
            wlast.eq(wleft == 2),
            wdone.eq(wlast),
        ),
        If(fsm.d_end, ser.stale.eq(ser.stale + 1)),
    ]


def _add_gap(ser, fsm):
    # The rate limit's idle cycles after each datagram.
    gap_count, g_last, gap_le1 = fsm.gap_count, fsm.g_last, fsm.gap_le1
    ser.sync += [
        # Loaded while not in GAP (the setting is static), so that `fin` does not fan out
        # to its 32 enables. Its `<= 1` is compared a cycle ahead (gap_le1, as f_gap): the
        # setting's synchroniser, a 32-bit carry chain and g_last's choice in one cycle were
        # eth's critical path of the colorlight_i5 (8.32 ns). Both bounds are gates (at_most),
        # not carry chains.
        gap_le1.eq(at_most(ser.gap, 1)),
        If(~fsm.s_gap,
            gap_count.eq(ser.gap),
            g_last.eq(gap_le1),
        ).Else(
            gap_count.eq(gap_count - 1),
            g_last.eq(at_most(gap_count, 2)),
        ),
    ]


def _add_statistics(ser, fsm, samples, with_sent):
    # Underruns (must stay 0) and datagrams sent, for the status registers.
    underrun_r = fsm.underrun_r
    ser.sync += [
        # Counted a cycle late: the selected head buffer's valid feeds one flip-flop, not the
        # counter's 32 enables.
        underrun_r.eq(fsm.s_samples & ~samples.valid),
        If(underrun_r, ser.underrun.eq(ser.underrun + 1)),
    ]
    # Datagrams sent: counted a cycle after the event (the 64-bit counter's enable is a register).
    if with_sent:
        sent_r = Signal()
        ser.sync += [sent_r.eq(ser.sent_event), If(sent_r, ser.sent.eq(ser.sent + 1))]


def _add_output(ser, fsm, desc, samples, header, packed, spw, nb, sample_bytes):
    # Output: header words, then sample words (the whole datagram is in the buffer, so valid
    # never drops in SAMPLES).
    source = ser.source
    s_header, s_samples, stale_drop, h_fin, s_fin = fsm.s_header, fsm.s_samples, fsm.stale_drop, fsm.h_fin, fsm.s_fin
    full_be = 1 << (nb - 1)  # LiteEth's last_be: one-hot at the last valid byte lane.
    ser.comb += [
        source.valid.eq((s_header & ~stale_drop) | s_samples),
        source.last.eq((s_header & h_fin) | (s_samples & s_fin)),
    ]
    if packed:
        # One buffer word per cycle; the last one holds the remaining 1..spw samples.
        last_be   = Signal(nb, name="k")
        tail      = Signal(max=max(spw, 2))  # Samples in the last word, minus one.
        ser.comb += [
            tail.eq((desc.count - 1)[:len(tail)] if spw > 1 else 0),
            Case(tail, {k: last_be.eq(1 << ((k + 1)*sample_bytes - 1)) for k in range(spw)}),
            source.data.eq(Mux(s_samples, samples.data, fsm.hdata if nb == 1 else mux_tree(header, fsm.hcount))),
            source.last_be.eq(Mux(s_header & h_fin, full_be, 0) | Mux(s_samples & s_fin, last_be, 0)),
        ]
    else:
        sample_b = Array([samples.data[8*(sample_bytes - 1 - i):8*(sample_bytes - i)] for i in range(sample_bytes)])
        ser.comb += [
            source.data.eq(Mux(s_samples, sample_b[fsm.bcount], fsm.hdata)),
            source.last_be.eq(source.last),
        ]
