/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Driver for the gateware's event counters (gateware/eventcounters.py): the SoC's drop and error
 * counts (frames and datagrams dropped, receive errors, ARP timeouts) in one RAM behind one CSR
 * window. Each event's index is the SoC's EVENT_<NAME> constant (generated/soc.h); a count is
 * as it was at most a few dozen cycles before the read.
 */
#ifndef ETHDAQ_EVENTS_H
#define ETHDAQ_EVENTS_H

#include <stdint.h>

#include <generated/csr.h>
#include <generated/soc.h>

/* The count of event `code` since reset: `select` takes effect the cycle after it is written and
 * `count` the cycle after that; the read of `select` between gives the gateware those cycles. */
static inline uint32_t event_count(unsigned code)
{
	events_select_write(code);
	(void)events_select_read();
	return events_count_read();
}

#endif
