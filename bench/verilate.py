#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Verilog export and Verilator build of a bench top, shared by bench/gmii.py and bench/xgmii.py."""

import hashlib
import shutil
import subprocess
from pathlib import Path


def verilog_text(top):
    """The Verilog of `top` (module "top"), its ports named by `top.renames`."""
    from litex.gen.fhdl.verilog import convert
    for sig, name in top.renames.items():
        sig.name_override = name
    out = convert(top, ios=top.ios, name="top")
    return str(out.main_source) if hasattr(out, "main_source") else str(out)


def compile_top(top, build_dir, tb):
    """Convert `top` (with `renames` {signal: port name} and `ios`) to build_dir/top.v and build
    it with the C++ testbench `tb`; return the executable. Skipped when neither the Verilog nor
    the testbench changed."""
    build_dir = Path(build_dir).resolve()
    build_dir.mkdir(parents=True, exist_ok=True)
    text = verilog_text(top)
    verilog = build_dir / "top.v"
    tb = Path(tb)
    digest = hashlib.sha256(text.encode() + tb.read_bytes()).hexdigest()
    stamp, exe = build_dir / "stamp", build_dir / "obj" / "Vtop"
    if exe.exists() and stamp.exists() and stamp.read_text() == digest:
        return exe
    verilog.write_text(text)
    shutil.rmtree(build_dir / "obj", ignore_errors=True)
    r = subprocess.run(["verilator", "--cc", str(verilog), "--exe", str(tb), "--build", "-j", "2",
                        "-Wno-fatal", "-Wno-lint", "-Wno-style", "--top-module", "top", "-O2",
                        "-CFLAGS", "-O1", "--Mdir", str(build_dir / "obj")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"verilator failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}")
    stamp.write_text(digest)
    return exe
