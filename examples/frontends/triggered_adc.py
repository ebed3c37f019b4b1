#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""A triggered ADC as a user's front-end: `ethdaq build|sim --frontend examples/frontends/triggered_adc.py`.

The ADC is a model (there is no converter on the simulated board): a 12-bit baseline with a
little noise and pulses that arrive at pseudo-random times, each decaying by a quarter every
sample. A trigger fires when a sample crosses the threshold upwards; the front-end then sends
`pre` samples from before the crossing and `post` samples from it on (a window of pre + post
samples; crossings inside a window start nothing). Each sample goes out as 16 bits on channel 0:
bit 15 marks the first sample of a window, bits 11..0 are the ADC value.

A window is only started when the output FIFO has room for all of it, so every window on the wire
is whole; a crossing without room is counted in `lost`. `model()` below is the same ADC in
Python: the tests compare what reaches the host with it, sample for sample.

CSRs (frontend_* in csr.csv): threshold, pre (0 to 15), post (1 to 255), divider (clock cycles
per ADC sample), rate (pulse probability per sample, times 2**32), enable; events and lost
(counts of windows sent and lost).

The window gate (high for the ADC sample periods whose samples go out, for an oscilloscope)
leaves on a Pmod pin, as `frontend()` below asks (ctx.pins, docs/frontends.md): on the
colorlight_i5, pin 0 of the extension board's header pmodf (PMOD pin 1, FPGA pin D1); on the
Arty, Pmod JB pin 1 (pmodb pin 0, FPGA pin E15). Untested on hardware.
"""

from migen import *
from migen.genlib.fifo import SyncFIFOBuffered

from litex.gen import *

from litex.soc.interconnect import stream
from litex.soc.interconnect.csr import *

ADC_BITS  = 12
PRE_MAX   = 15
FIRST     = 1 << 15
SEED      = 0x2545F491
BASELINE  = 200
FIFO_DEPTH = 512

DEFAULTS = dict(threshold=1200, pre=4, post=12, divider=16, rate=2**32//64)


def xorshift32(x):
    a = x ^ (x << 13)[:32]
    b = a ^ (a >> 17)
    return b ^ (b << 5)[:32]


class TriggeredADC(LiteXModule):
    def __init__(self, ctx):
        self.sources = [stream.Endpoint([("data", ctx.sample_width)])]
        # The worst case, for the link budget (docs/frontends.md): at divider 1 the ADC makes a
        # sample every clock cycle and back-to-back windows send them all.
        self.max_rates = [ctx.sys_clk_freq]

        self.threshold = CSRStorage(ADC_BITS, reset=DEFAULTS["threshold"], description="Trigger threshold (ADC counts).")
        self.pre       = CSRStorage(4,  reset=DEFAULTS["pre"],     description="Samples sent from before the crossing (0 to 15).")
        self.post      = CSRStorage(8,  reset=DEFAULTS["post"],    description="Samples sent from the crossing on (1 to 255).")
        self.divider   = CSRStorage(16, reset=DEFAULTS["divider"], description="Clock cycles per ADC sample (1 or more).")
        self.rate      = CSRStorage(32, reset=DEFAULTS["rate"],    description="Pulse probability per sample, times 2**32.")
        self.enable    = CSRStorage(1,  reset=1,                   description="Triggers start windows.")
        self.events    = CSRStatus(32, description="Windows sent.")
        self.lost      = CSRStatus(32, description="Crossings with no room in the FIFO for their window.")
        self.gate      = Signal()  # High for the sample periods whose samples go out (the windows).

        # # #

        # The ADC model: one sample every `divider` cycles.
        tick  = Signal()
        count = Signal(16)
        self.sync += [
            count.eq(count + 1),
            If(count + 1 >= self.divider.storage, count.eq(0)),
        ]
        self.comb += tick.eq(count + 1 >= self.divider.storage)

        rng     = Signal(32, reset=SEED)
        pulse   = Signal(14)   # Sum of decaying pulses; at most 4 * 2047 < 2**14.
        x       = Signal(ADC_BITS)
        x_prev  = Signal(ADC_BITS)
        fresh   = Signal()     # x holds a new sample this cycle.
        rng_next   = xorshift32(rng)
        pulse_next = Signal(14)
        level      = Signal(15)
        self.comb += [
            pulse_next.eq(pulse - (pulse >> 2) + Mux(rng_next < self.rate.storage, rng_next[:11], 0)),
            level.eq(BASELINE + rng_next[29:] + pulse_next),
        ]
        self.sync += [
            fresh.eq(tick),
            If(tick,
                rng.eq(rng_next),
                pulse.eq(pulse_next),
                x.eq(Mux(level > 2**ADC_BITS - 1, 2**ADC_BITS - 1, level)),
                x_prev.eq(x),
            ),
        ]

        # The last PRE_MAX samples before x: the window starts `pre` samples back.
        history = [Signal(ADC_BITS, name=f"history{i}") for i in range(PRE_MAX)]
        self.sync += If(fresh, history[0].eq(x), *[history[i].eq(history[i - 1]) for i in range(1, PRE_MAX)])
        delayed = Signal(ADC_BITS)
        self.comb += delayed.eq(Mux(self.pre.storage == 0, x, Array(history)[self.pre.storage - 1]))

        # Windows into the FIFO, whole or not at all.
        self.fifo = fifo = SyncFIFOBuffered(16, FIFO_DEPTH)
        remaining = Signal(9)
        window    = Signal(9)
        crossing  = Signal()
        events    = Signal(32)
        lost      = Signal(32)
        self.comb += [
            window.eq(self.pre.storage + self.post.storage),
            crossing.eq(fresh & self.enable.storage & (x >= self.threshold.storage) & (x_prev < self.threshold.storage)),
            fifo.din.eq(delayed),
            fifo.we.eq(0),
            self.events.status.eq(events),
            self.lost.status.eq(lost),
        ]
        self.sync += [
            If(fresh & (remaining != 0),
                remaining.eq(remaining - 1),
            ).Elif(crossing,
                If(fifo.level + window <= FIFO_DEPTH,
                    remaining.eq(window - 1),
                    events.eq(events + 1),
                ).Else(
                    lost.eq(lost + 1),
                )
            )
        ]
        self.comb += [
            If(fresh & (remaining != 0),
                fifo.we.eq(1),
            ).Elif(crossing & (fifo.level + window <= FIFO_DEPTH),
                fifo.we.eq(1),
                fifo.din.eq(FIRST | delayed),
            )
        ]
        self.sync += If(fresh, self.gate.eq(fifo.we))

        source = self.sources[0]
        self.comb += [
            source.valid.eq(fifo.readable),
            source.data.eq(fifo.dout),
            fifo.re.eq(source.ready),
        ]


def frontend(ctx):
    if ctx.sample_width != 16:
        raise ValueError(f"this example sends 16-bit samples; the build's channels take {ctx.sample_width}")
    adc = TriggeredADC(ctx)
    # The window gate on a Pmod pin: on the colorlight_i5's extension board, header pmodf pin 0;
    # on the Arty, Pmod JB pin 1 (pmodb pin 0). Other boards keep it inside.
    gate_pin = {"colorlight_i5": "pmodf", "digilent_arty": "pmodb"}.get(ctx.board)
    if gate_pin:
        adc.comb += ctx.pins("gate", gate_pin, 0, iostandard="LVCMOS33").eq(adc.gate)
    return adc


# The same ADC in Python ---------------------------------------------------------------------------

def adc_samples(rate=DEFAULTS["rate"], seed=SEED):
    """The ADC's samples x0, x1, ... (an endless generator)."""
    rng, pulse = seed, 0
    while True:
        rng ^= (rng << 13) & 0xffffffff
        rng ^= rng >> 17
        rng ^= (rng << 5) & 0xffffffff
        pulse = pulse - (pulse >> 2) + ((rng & 0x7ff) if rng < rate else 0)
        yield min(BASELINE + (rng >> 29) + pulse, 2**ADC_BITS - 1)


def model(threshold=DEFAULTS["threshold"], pre=DEFAULTS["pre"], post=DEFAULTS["post"],
          rate=DEFAULTS["rate"], seed=SEED):
    """The 16-bit words the front-end sends, window after window (an endless generator), when
    nothing is lost. Samples before the first are 0, as the gateware's history is at reset."""
    history = [0]*PRE_MAX   # history[k] = x[n-1-k]
    x_prev, remaining = 0, 0
    for x in adc_samples(rate, seed):
        delayed = x if pre == 0 else history[pre - 1]
        if remaining:
            remaining -= 1
            yield delayed
        elif x >= threshold and x_prev < threshold:
            remaining = pre + post - 1
            yield FIRST | delayed
        history = [x] + history[:-1]
        x_prev = x
