"""The detector emulator's pulse train in Python (gateware/emulator.py's generators, bit for bit):
the reference the gateware test and the plot test share."""

from ethdaq.gateware.emulator import amplitude_seed, xorshift16_ref, xorshift32_ref


def model(rate, cycles, seed, sample_width=16):
    """The pulse train in Python, cycle by cycle from a written seed: the decision word (a
    xorshift32) and the amplitude word (a 16-bit xorshift) each take one step a cycle; a pulse's
    amplitude is the amplitude word in the cycle it fires."""
    rng, arng = seed or 1, amplitude_seed(seed, sample_width)
    fire = rng < rate
    out = []
    for _ in range(cycles):
        if fire:
            out.append(arng >> (16 - sample_width))
        rng = xorshift32_ref(rng)
        fire = rng < rate
        arng = xorshift16_ref(arng)
    return out
