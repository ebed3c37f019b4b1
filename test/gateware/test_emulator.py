"""Detector emulator (gateware/emulator.py): the pulse train's arrivals follow its rate and its
amplitudes cover the whole sample range, uniformly, at any rate. The gateware (Migen
simulation) is checked bit for bit against a Python model of its two generators; the
statistics are taken on the model over millions of cycles."""

import math

import pytest
from migen import run_simulation

from emulator_model import model
from ethdaq.gateware.emulator import MODE_COUNTER, MODE_PULSE, DetectorEmulator, amplitude_seed, xorshift16_ref


def run(mode, rate, cycles, seed=None, sample_width=16, top=None, step=None):
    emu = DetectorEmulator(sample_width=sample_width, seed=3)
    got = []

    def gen():
        yield emu.source.ready.eq(1)
        yield emu._rate.storage.eq(rate)
        if top is not None:   # The ramp's settings.
            yield emu._top.storage.eq(top)
            yield emu._step.storage.eq(step)
        if seed is not None:  # Restart the generators, then switch the mode on.
            yield emu._seed.storage.eq(seed)
            yield emu._seed.re.eq(1)
            yield
            yield emu._seed.re.eq(0)
        yield emu._mode.storage.eq(mode)
        for _ in range(cycles):
            yield
            if (yield emu.source.valid):
                got.append((yield emu.source.data))
    run_simulation(emu, gen())
    return got



def test_the_amplitude_generator_takes_every_non_zero_value_once_per_period():
    x, seen = 1, set()
    for _ in range(65535):
        seen.add(x)
        x = xorshift16_ref(x)
    assert x == 1 and len(seen) == 65535 and 0 not in seen


def uniform_checks(amplitudes, top=2**16 - 1):
    n = len(amplitudes)
    mean = sum(amplitudes)/n
    sigma = (top + 1)/math.sqrt(12*n)
    assert abs(mean - top/2) < 4*sigma, f"mean {mean:.0f}, expected {top/2:.0f} ± {sigma:.0f}"
    # Every eighth of the range is hit about as often as the others (chi-square, 7 degrees of
    # freedom: 24.3 is its 0.999 quantile).
    bins = [0]*8
    for a in amplitudes:
        bins[a*8 // (top + 1)] += 1
    chi2 = sum((b - n/8)**2/(n/8) for b in bins)
    assert chi2 < 24.3, f"amplitudes not uniform over the range: {bins}"
    assert min(amplitudes) < (top + 1)//16 and max(amplitudes) > top - (top + 1)//16


@pytest.mark.parametrize("rate", [0.002, 0.3])
def test_the_gateware_pulse_train_is_the_model_bit_for_bit(rate):
    """The statistics below are taken on the model, over millions of cycles (Migen simulates a
    few hundred cycles a second): here the gateware's pulses and amplitudes equal it exactly."""
    r = int(rate*2**32)
    got = run(MODE_PULSE, r, 3000, seed=12345)
    want = model(r, 3000, 12345)
    assert len(got) >= 5 and want[:len(got)] == got


@pytest.mark.parametrize("rate, cycles", [(0.001, 2_000_000), (0.01, 300_000), (0.3, 20_000)])
def test_pulse_amplitudes_cover_the_whole_range_at_low_and_high_rates(rate, cycles):
    """With one word for both, amplitudes at rate 0.001 stayed below 0.001 x 65536 = 65."""
    uniform_checks(model(int(rate*2**32), cycles, 99))


@pytest.mark.parametrize("rate, cycles", [(0.001, 2_000_000), (0.05, 100_000)])
def test_pulse_count_follows_the_rate(rate, cycles):
    """A pulse arrives in each cycle with probability rate (the sink is always ready here), so
    their count is binomial around cycles x rate."""
    got = model(int(rate*2**32), cycles, 5)
    expected = cycles*rate
    sd = math.sqrt(cycles*rate*(1 - rate))
    assert abs(len(got) - expected) < 4*sd, f"{len(got)} pulses, expected {expected:.0f} ± {sd:.0f}"


def test_a_written_seed_restarts_both_sequences():
    """The same seed gives the same pulses and amplitudes; another seed other ones."""
    rate = int(0.05*2**32)
    a = run(MODE_PULSE, rate, 1000, seed=77)
    b = run(MODE_PULSE, rate, 1000, seed=77)
    c = run(MODE_PULSE, rate, 1000, seed=78)
    assert len(a) >= 20 and a == b and a != c


def test_amplitude_seed_is_never_zero():
    for seed in (0, 1, 2, 0xACE1, 0x1234ACE1, 0xffffffff):
        assert 0 < amplitude_seed(seed) < 2**16


def test_counter_mode_is_unchanged():
    got = run(MODE_COUNTER, 2**31, 200)
    assert got == list(range(len(got))) and 95 <= len(got) <= 101


def test_counter_wraps_at_the_sample_width_whatever_the_ramp_settings():
    """The counter counts by 1 and wraps at 2**width, whatever the ramp's step and top (8-bit
    samples: the wrap after 256)."""
    got = run(MODE_COUNTER, 0xFFFFFFFF, 700, sample_width=8, top=3, step=5)
    assert len(got) > 512
    assert got == [k % 256 for k in range(len(got))]


def ramp_model(top, step, n, width=16):
    """The ramp in Python: +step, back to 0 once a value passes top - step (integers)."""
    out, v = [], 0
    for _ in range(n):
        out.append(v)
        v = 0 if v > top - step else (v + step) % 2**width
    return out


@pytest.mark.parametrize("top,step", [(10, 3), (9, 3), (0xFFFF, 0x4000), (0xFFFF, 0x5555), (0xFFF0, 0x7FFF),
                                      (5, 7), (0, 1), (100, 0), (0xFFFF, 0xFFFF)])
def test_ramp_steps_and_returns_to_zero_past_top(top, step):
    got = run(2, 0xFFFFFFFF, 40, top=top, step=step)  # MODE_RAMP
    assert len(got) > 20
    assert got == ramp_model(top, step, len(got))
