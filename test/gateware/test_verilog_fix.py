"""LiteX's Verilog of negative constants (ethdaq/gateware/verilog_fix.py), checked by running
the generated Verilog in Verilator against Python's arithmetic, which Migen's simulator follows.

Without the fix, `a > -1000000000` with a signed `a` compares unsigned in Verilog: positive
values come out false. That made the PTP clock reject every positive step (found by the
two-board simulation, bench/ptp2.py, whose slave at -100 ppm went FAULTY)."""

import shutil
import subprocess

import pytest
from migen import Module, Signal

import ethdaq.gateware  # noqa: F401  (applies the fix)
from litex.gen.fhdl.verilog import convert

from conftest import REPO

VALUES = [0, 1, 8917, 999_999_999, 1_000_000_000, 2**31 - 1, -1, -8917, -999_999_999,
          -1_000_000_000, -2**31]

TB = r"""
#include <cstdio>
#include <cstdint>
#include "Vt.h"
int main() {
    Vt t;
    const int32_t v[] = { %s };
    for (int32_t a : v) {
        t.a = (uint32_t)a;
        t.eval();
        int64_t sum = (int64_t)((uint64_t)t.sum << 29) >> 29;  // 35-bit signed
        printf("%%d %%d %%d %%lld\n", a, t.gt, t.lt, (long long)sum);
    }
}
"""


class Negatives(Module):
    def __init__(self):
        self.a   = Signal((32, True))
        self.gt  = Signal()
        self.lt  = Signal()
        self.sum = Signal((35, True))
        self.comb += [
            self.gt.eq(self.a > -1_000_000_000),
            self.lt.eq(self.a < -5),
            self.sum.eq(self.a + -1_000_000_000),
        ]


@pytest.mark.skipif(shutil.which("verilator") is None, reason="verilator not installed")
def test_negative_constants_are_signed_in_verilog_as_in_migen(tmp_path):
    m = Negatives()
    text = str(convert(m, ios={m.a, m.gt, m.lt, m.sum}, name="t"))
    assert "-31'sd1000000000" in text
    (tmp_path / "t.v").write_text(text)
    (tmp_path / "tb.cpp").write_text(TB % ", ".join(f"(int32_t){v}" for v in VALUES))
    subprocess.run(["verilator", "--cc", "t.v", "--exe", "tb.cpp", "--build", "-Wno-fatal",
                    "-Wno-lint", "-Wno-style", "--top-module", "t", "-Mdir", "obj"],
                   cwd=tmp_path, check=True, capture_output=True)
    out = subprocess.run([str(tmp_path / "obj" / "Vt")], capture_output=True, text=True, check=True).stdout
    for line, a in zip(out.splitlines(), VALUES):
        got = tuple(map(int, line.split()))
        assert got == (a, int(a > -1_000_000_000), int(a < -5), a - 1_000_000_000), line
