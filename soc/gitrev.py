#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""The git revision of the ethdaq sources: builds name themselves by it, `ethdaq --version` shows it."""

import subprocess
from pathlib import Path


def git_hash():
    """Git revision of the ethdaq sources, with '-dirty' when tracked files have local changes."""
    root = Path(__file__).resolve().parents[1]
    try:
        run = lambda *args: subprocess.run(["git", "-C", str(root), *args],
            capture_output=True, text=True, check=True).stdout.strip()
        rev   = run("rev-parse", "--short=12", "HEAD")
        dirty = run("status", "--porcelain", "--untracked-files=no")
        return rev + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
