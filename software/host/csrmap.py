#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""A user front-end's registers, from the csr.json its build writes: what `ethdaq ctl regs` and
`ethdaq ioc --csr` read and write through the control protocol's REG_READ and REG_WRITE.

LiteX's csr.json names every CSR (`csr_registers`: address, size in 32-bit words, "rw" or "ro")
and each module's base (`csr_bases`); the front-end's are `frontend_*` from
`csr_bases["frontend"]`, and REG_READ and REG_WRITE address them by byte offset from that base.
A register wider than 32 bits is several words on the bus, most significant first.
"""

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Register:
    """One front-end register: its name without `frontend_`, byte offset from the front-end's
    base, 32-bit words and whether the CPU (and so REG_WRITE) may write it."""
    name:     str
    offset:   int
    words:    int
    writable: bool

    @property
    def bits(self):
        return 32 * self.words

    def to_words(self, value):
        """`value` as the register's bus words, most significant first; ValueError naming the
        register when it does not fit."""
        if not 0 <= value < 1 << self.bits:
            raise ValueError(f"{self.name} holds {self.bits} bits (0 to {(1 << self.bits) - 1}), not {value}")
        return [(value >> 32 * (self.words - 1 - i)) & 0xFFFFFFFF for i in range(self.words)]

    def from_words(self, words):
        """The register's value from its bus words as REG_READ gives them."""
        return sum(w << 32 * (self.words - 1 - i) for i, w in enumerate(words))


def frontend_registers(path):
    """The front-end's registers in a build's csr.json, in address order: {name: Register}.
    ValueError, as one line naming the file, for a file that is missing, not a LiteX csr.json, or
    from a build without a front-end."""
    try:
        csr = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ValueError(f"{path}: not found (the build directory's csr.json)") from None
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not a build's csr.json ({getattr(e, 'strerror', None) or e})") from None
    try:
        bases = csr["csr_bases"]
        if "frontend" not in bases:
            raise ValueError(f"{path}: its build has no front-end registers (only {', '.join(bases) or 'none'}); "
                             "was the board built with --frontend?")
        base = bases["frontend"]
        regs = [Register(name[len("frontend_"):], r["addr"] - base, r["size"], r["type"] == "rw")
                for name, r in csr["csr_registers"].items() if name.startswith("frontend_")]
    except (KeyError, TypeError, AttributeError):
        raise ValueError(f"{path}: not a build's csr.json (no csr_bases and csr_registers as LiteX writes them)") from None
    return {r.name: r for r in sorted(regs, key=lambda r: r.offset)}
