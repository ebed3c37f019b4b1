/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * IEEE 802.3 clause 22 management frames to the PHY over LiteEth's MDIO pins (the CSRs
 * ethphy_mdio_w and ethphy_mdio_r: MDC and MDIO as bits), a few bits per call of mdio_step(), so
 * that the main loop never waits long for the PHY (LiteX's libliteeth mdio_read() busy-waits
 * through all 64 bits of a frame, with delay loops).
 */
#ifndef ETHDAQ_MDIO_H
#define ETHDAQ_MDIO_H

#include <stdint.h>

/* 1 when this build has MDIO pins (the board's PHY is managed), 0 otherwise. */
int      mdio_present(void);
/* Start a read or a write; the previous one must be done (mdio_step() returned 0). */
void     mdio_start_read(uint8_t phy, uint8_t reg);
void     mdio_start_write(uint8_t phy, uint8_t reg, uint16_t value);
/* Clock the next bits. Returns 1 while the frame goes on, 0 once it is done (and when idle). */
int      mdio_step(void);
/* The register read by the last frame. 0xffff when no PHY answered: the line's pull-up. */
uint16_t mdio_result(void);

#endif
