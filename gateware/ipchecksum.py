#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""IPv4 header checksum with one adder: LiteEth's LiteEthIPV4Checksum, word by word.

LiteEth's IPv4 receiver and transmitter check and make the header checksum with
LiteEthIPV4Checksum: a pipeline of one 17-bit adder and one end-around-carry adder per header
word (10 words on receive, 9 on transmit: the checksum's own word is skipped), each stage a
register, one stage a cycle. On the ECP5 that is 530 LUT4 equivalents for the two (yosys
synth_ecp5, colorlight_i5 SoC: 253 carry cells and 457 flip-flops). The header does not change
while its sum is made (the receiver holds its header until `done`, the transmitter its datagram's
first beat), so one adder pair can walk the words instead, fed by a 16-bit word multiplexer: the
same sums in the same registers' order, the same value, `done` in the same cycle.

    header (ipv4_header.length*8 bits, stable from reset to done)
        │  word[count]
        ▼
    r = fold(r + word)   (17 bits, end-around carry, as LiteEth's)  ──► value = ~r, byte-swapped
    count: 0 .. n_cycles while ce   ──► done = (count == n_cycles)

`replace_ip_checksums` puts one in place of each of a LiteEthIP's two, before it is finalized.
"""

from migen import *

from litex.gen import *

from liteeth.common import ipv4_header
from liteeth.core.ip import LiteEthIPV4Checksum


def checksum_words(skip_checksum):
    """Indices of the 16-bit header words summed, in LiteEth's order."""
    skip = ipv4_header.fields["checksum"].byte//2
    return [i for i in range(ipv4_header.length//2) if not (skip_checksum and i == skip)]


def checksum_cycles(skip_checksum):
    """Cycles of `ce` from reset to done: one per word, and one more when checking (LiteEth's)."""
    return len(checksum_words(skip_checksum)) + (0 if skip_checksum else 1)


class IPv4Checksum(LiteXModule):
    """LiteEthIPV4Checksum's interface and timing: `header` in, `value` and `done` out; `ce`
    (count) and `reset` (start again) as LiteEth's CEInserter and ResetInserter give them. Pass
    an existing checksum's signals to take its place (replace_ip_checksums)."""
    def __init__(self, skip_checksum=False, header=None, value=None, done=None, ce=None, reset=None):
        self.header = header if header is not None else Signal(ipv4_header.length*8)
        self.value  = value  if value  is not None else Signal(16)
        self.done   = done   if done   is not None else Signal()
        self.ce     = ce     if ce     is not None else Signal()
        self.reset  = reset  if reset  is not None else Signal()

        # # #

        words    = checksum_words(skip_checksum)
        n_cycles = checksum_cycles(skip_checksum)
        count    = Signal(max=n_cycles + 1)
        word     = Signal(16)
        r        = Signal(17, reset_less=True)
        s        = Signal(17)
        self.comb += [
            Case(count, {k: word.eq(self.header[16*i:16*(i + 1)]) for k, i in enumerate(words)}),
            # The first word starts from 0 (LiteEth's first stage adds it to a constant 0).
            s.eq(Mux(count == 0, 0, r) + word),
            self.value.eq(~Cat(r[8:16], r[:8])),
        ]
        # `done` is count == n_cycles, kept in a flip-flop of its own: LiteEth's transmitter puts
        # it in the `ready` it gives its sink, so the path from it runs on through the UDP
        # crossbar into the ping responder's RAM (12 to 14 LUT levels on sys from the count).
        self.sync += [
            If(self.reset,
                count.eq(0),
                self.done.eq(0),
            ).Elif(self.ce & ~self.done,
                count.eq(count + 1),
                self.done.eq(count == n_cycles - 1),
                If(count < len(words),
                    r.eq(s[:16] + s[16]),
                ),
            ),
        ]


def replace_ip_checksums(ip):
    """Put an IPv4Checksum in place of each LiteEthIPV4Checksum of `ip` (a LiteEthIP: its
    receiver's and its transmitter's), before it is finalized, on the same signals. Returns the
    two new checksums (receive, transmit)."""
    new = []
    for side, skip in ((ip.rx, False), (ip.tx, True)):
        old = getattr(side, "checksum", None)
        if not isinstance(old, LiteEthIPV4Checksum):
            raise ValueError(f"replace_ip_checksums: {type(side).__name__} has no LiteEthIPV4Checksum; "
                             "LiteEth no longer builds its IPv4 checksum this way")
        checksum = IPv4Checksum(skip_checksum=skip, header=old.header, value=old.value, done=old.done,
                                ce=old.ce, reset=old.reset)
        side._submodules = [(name, checksum if m is old else m) for name, m in side._submodules]
        new.append(checksum)
    return tuple(new)
