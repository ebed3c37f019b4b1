#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""The result tables the bench scripts print: Markdown (for docs/) or right-aligned text."""


def print_table(head, rows, markdown=False):
    """head: column names; rows: lists of strings."""
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "|".join("-" * (len(h) + 2) for h in head) + "|")
        for r in rows:
            print("| " + " | ".join(r) + " |")
        return
    widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    for r in [head] + rows:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths)))
