/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * The board side of the control protocol's RX_STATS: every received frame the board did not use,
 * counted by cause (protocol.py RX_COUNTERS), from the receive audit (gateware/rxaudit.py), the
 * MAC, the frame gate, the CPU's mailboxes and the PTP port. The control handler adds its own.
 */
#ifndef ETHDAQ_RXSTATS_H
#define ETHDAQ_RXSTATS_H

#include <stdint.h>

/* ctl_ops.rx_counter: 1 and *value if this build has counter `code` (CTL_RX_COUNTER_*), else 0. */
int rxstats_counter(uint8_t code, uint64_t *value);

#endif
