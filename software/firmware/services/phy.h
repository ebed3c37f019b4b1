/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * PHY management: finds the board's PHY on MDIO, watches its link from the main loop (every
 * ETHDAQ_PHY_POLL_MS, a few MDIO bits per call), logs every change on the console, counts losses, and
 * reports the link in STATUS.
 */
#ifndef ETHDAQ_PHY_H
#define ETHDAQ_PHY_H

#include <stdint.h>

#include "protocol/ctl.h"

void phy_init(void);
/* now_ns: a monotonic clock (ns); 0 when the build has none: then the link is looked at on every
 * call. */
void phy_poll(uint64_t now_ns);
void phy_link(struct ctl_link *l);

#endif
