#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""A hardware build's gateware directory that can be moved or copied to another machine and built
there (the Vivado project to a machine with Vivado, the ECP5 scripts anywhere with Yosys and
nextpnr).

LiteX's platform keeps every source by absolute path (GenericPlatform.add_source: the CPU's Verilog
inside the pythondata_cpu_vexriscv package of this virtualenv, our gateware/verilog/*.v, a user's
front-end), and its toolchains write those paths into the project (Vivado's Tcl, Yosys' .ys). Just
before the toolchain writes its project, `localize` copies every source from outside the gateware
directory into its `sources/` subdirectory and names each source relative to the gateware
directory, the directory the toolchain's scripts run from. The files LiteX generates there (the
top-level Verilog, the memories' .init files it reads with $readmemh, the constraints) are already
named relative to it.
"""

import shutil
from pathlib import Path

SOURCES = "sources"


def _relative(path, gateware):
    """`path` relative to `gateware`, or None when it lies outside."""
    try:
        return Path(path).resolve().relative_to(gateware)
    except ValueError:
        return None


class _Copier:
    """Copies files and directories into gateware/sources/, one name each (a second file of the
    same name from another directory goes to sources/2/NAME, and so on)."""
    def __init__(self, gateware):
        self.gateware = gateware
        self.dest = gateware / SOURCES
        self.copied = {}   # Resolved original -> path relative to the gateware directory.

    def __call__(self, path):
        path = Path(path).resolve()
        inside = _relative(path, self.gateware)
        if inside is not None:
            return inside
        if path not in self.copied:
            taken = set(self.copied.values())
            rel, n = Path(SOURCES) / path.name, 1
            while rel in taken:
                n += 1
                rel = Path(SOURCES) / str(n) / path.name
            target = self.gateware / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if path.is_dir():
                shutil.copytree(path, target)
            else:
                shutil.copy2(path, target)
            self.copied[path] = rel
        return self.copied[path]


def localize(platform, gateware):
    """Copy the platform's sources, Verilog include directories, EDIFs and IPs from outside
    `gateware` into gateware/sources/ and rename each (in the platform, where the toolchain reads
    them) relative to `gateware`. Returns {original absolute path: relative path} of the copies."""
    gateware = Path(gateware).resolve()
    shutil.rmtree(gateware / SOURCES, ignore_errors=True)   # No copy left from an earlier build.
    copy = _Copier(gateware)
    platform.sources = [(str(copy(filename)), *rest) for filename, *rest in platform.sources]
    platform.verilog_include_paths = [str(copy(p)) for p in platform.verilog_include_paths]
    if hasattr(platform, "edifs"):   # Xilinx platforms only.
        platform.edifs = {str(copy(f)) for f in platform.edifs}
        platform.ips = {str(copy(f)): disable for f, disable in platform.ips.items()}
    return {str(k): str(v) for k, v in copy.copied.items()}


def localize_before_project(toolchain, gateware):
    """Have `toolchain` (a LiteX toolchain about to build) localize the platform's sources just
    before it writes its project: the sources are final then (the SoC finalised, the top-level
    Verilog added) and nothing has named them yet."""
    build_project = toolchain.build_project

    def build_localized_project():
        localize(toolchain.platform, gateware)
        return build_project()
    toolchain.build_project = build_localized_project
