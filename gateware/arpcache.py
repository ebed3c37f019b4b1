#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""LiteEth's ARP cache answers from the entry its search found.

LiteEthARPCache (liteeth/core/arp.py) searches its entries in MEM_SEARCH with its asynchronous
read port's address on the search counter, and answers in RESPONSE with that port's data, but
drives the address only in MEM_SEARCH: in RESPONSE it reads entry 0. With the two entries LiteEth
keeps, a lookup that matches entry 1 answers with entry 0's MAC, without error: once two hosts
have talked to the board within the cache's clear period (1 s), the board's UDP and ICMP answers
to the second go to the first's MAC. `answer_from_found_entry` adds the missing address to
RESPONSE (the search counter still points at the matching entry there).
"""

from migen.fhdl.structure import _Assign


def answer_from_found_entry(cache):
    """Fix `cache` (a LiteEthARPCache, before it is finalized) in place."""
    search = [st for st in cache.fsm.actions.get("MEM_SEARCH", []) if isinstance(st, _Assign)]
    if len(search) != 1 or "RESPONSE" not in cache.fsm.actions:
        raise ValueError(f"answer_from_found_entry: {len(search)} address assignments in LiteEthARPCache's "
                         "MEM_SEARCH, not 1; LiteEth no longer searches its cache this way")
    address, search_count = search[0].l, search[0].r
    cache.fsm.act("RESPONSE", address.eq(search_count))
