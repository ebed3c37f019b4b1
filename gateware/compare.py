#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Comparisons of an unsigned signal with a constant, as gates.

Yosys turns `x <= k` (and `<`, `>`, `>=`) into a subtraction on the ECP5's carry chain whatever
`k` is: a CCU2C for every two bits of `x`, and a path through the whole chain. With a constant,
the comparison is a function of `x`'s bits alone, which the LUT mapper makes a tree of LUTs:
fewer cells for a wide `x`, and no carry chain in front of what reads the result.
"""


def at_most(x, k):
    """x <= k, bit by bit from the lowest: a bit of x below k's decides, an equal one leaves it to
    the bits beneath."""
    if k < 0:
        return 0
    le = 1
    for i in range(len(x)):
        le = (~x[i] | le) if (k >> i) & 1 else (~x[i] & le)
    return le if k < 2**len(x) else 1


def below(x, k):
    """x < k."""
    return at_most(x, k - 1)


def above(x, k):
    """x > k."""
    le = at_most(x, k)
    return int(not le) if isinstance(le, int) else ~le


def at_least(x, k):
    """x >= k."""
    return above(x, k - 1)
