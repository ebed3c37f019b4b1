"""XGMIITransmitter (gateware/xgmiitx.py) in Verilator, its lanes decoded by an independent
implementation: cocotbext-eth's XgmiiSink (test/gateware/cocotb/xgmii_sink.py, run through cocotb's
Verilator runner). Frames of every length 60..68 (each residue mod 8), 1514 and 9014 bytes, back
to back from bench/xgmii.py's ideal frame source."""

import os
import subprocess
import sys

from bench import xgmii
from bench.verilate import verilog_text
from conftest import REPO

LENS = list(range(60, 69)) + [1514, 9014] + list(range(100, 108))

RUNNER = """
import sys
from cocotb.runner import get_runner
r = get_runner("verilator")
r.build(verilog_sources=[sys.argv[1]], hdl_toplevel="top", build_dir=sys.argv[2],
        build_args=["-Wno-fatal", "-Wno-lint", "-Wno-style"])
r.test(hdl_toplevel="top", test_module="xgmii_sink", test_dir=sys.argv[3], build_dir=sys.argv[2],
       results_xml=sys.argv[2] + "/results.xml")
"""


def test_cocotbext_eth_xgmii_sink_decodes_every_frame(tmp_path):
    verilog = tmp_path / "top.v"
    verilog.write_text(verilog_text(xgmii.XGMIIBenchTop(mac="ethdaq")))
    expected = tmp_path / "expected.hex"
    expected.write_text("\n".join(xgmii.expected_frame(n, k).hex() for k, n in enumerate(LENS)))
    env = dict(os.environ, XGMII_LENS=",".join(map(str, LENS)), XGMII_EXPECTED=str(expected),
               PATH=f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}")
    env.pop("PYTEST_CURRENT_TEST", None)  # cocotb's runner refuses to run under pytest otherwise.
    r = subprocess.run([sys.executable, "-c", RUNNER, str(verilog), str(tmp_path / "sim"),
                        str(REPO / "test" / "gateware" / "cocotb")], env=env, capture_output=True, text=True, timeout=900)
    out = r.stdout + r.stderr
    assert "TESTS=1 PASS=1 FAIL=0" in out, out[-3000:]
    assert f"{len(LENS)} frames decoded by cocotbext-eth's XgmiiSink" in out
