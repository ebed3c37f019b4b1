#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""PHY management: the firmware's reading of clause 22 registers (services/phy_mode.c), built for
the host and tested with cmocka (test/firmware/c/phy_unit.c). The simulated board's PHY model is tested in
test_simphy.py; the firmware against it, with the cable unplugged, in test_network.py."""

import shutil
import subprocess
from pathlib import Path

import pytest


def test_cmocka_unit_tests_of_the_mode_resolution(repo, tmp_path):
    if shutil.which("gcc") is None or not Path("/usr/include/cmocka.h").exists():
        pytest.fail("gcc and cmocka are required (make test installs them)")
    exe = tmp_path / "phy_unit"
    subprocess.run(["gcc", "-std=c99", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-fsanitize=address,undefined",
                    "-fno-sanitize-recover=all", f"-I{repo}/software/firmware/services",
                    str(repo / "software/firmware/services/phy_mode.c"), str(repo / "test/firmware/c/phy_unit.c"),
                    "-lcmocka", "-o", str(exe)], check=True)
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[  PASSED  ] 8 test(s)." in r.stdout + r.stderr
