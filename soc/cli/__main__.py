#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""`python -m ethdaq.soc.cli ...`, as the `ethdaq` command."""

import sys

from ethdaq.soc.cli import main

sys.exit(main())
