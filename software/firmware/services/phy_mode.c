/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include <stdio.h>
#include <string.h>

#include "phy_mode.h"

int phy_resolve(const struct phy_regs *r, struct phy_mode *mode)
{
	memset(mode, 0, sizeof(*mode));
	if (!(r->bmcr & PHY_BMCR_ANENABLE)) {
		/* Forced: BMCR's speed bits (MSB, LSB: 00 10, 01 100, 10 1000 Mb/s) and duplex. */
		unsigned sel = ((r->bmcr & PHY_BMCR_SPEED_MSB) ? 2u : 0u) | ((r->bmcr & PHY_BMCR_SPEED_LSB) ? 1u : 0u);
		if (sel == 3u)
			return -1;  /* Reserved. */
		mode->speed = sel == 2u ? 1000u : sel == 1u ? 100u : 10u;
		mode->full_duplex = (r->bmcr & PHY_BMCR_FULLDPLX) != 0;
		return 0;
	}
	if (!(r->bmsr & PHY_BMSR_ANEGCOMPLETE))
		return -1;
	mode->autoneg = 1;
	/* Annex 28B.3: the highest common mode, full before half duplex at each speed. GBSR's
	 * partner bits are 2 above GBCR's own. */
	uint16_t gig = (uint16_t)((r->bmsr & PHY_BMSR_ESTATEN) ? (r->gbcr & (r->gbsr >> 2)) : 0u);
	uint16_t common = (uint16_t)(r->anar & r->anlpar);
	if (gig & PHY_ADV_1000FULL) {
		mode->speed = 1000; mode->full_duplex = 1;
	} else if (gig & PHY_ADV_1000HALF) {
		mode->speed = 1000;
	} else if (common & PHY_ADV_100FULL) {
		mode->speed = 100; mode->full_duplex = 1;
	} else if (common & PHY_ADV_100HALF) {
		mode->speed = 100;
	} else if (common & PHY_ADV_10FULL) {
		mode->speed = 10; mode->full_duplex = 1;
	} else if (common & PHY_ADV_10HALF) {
		mode->speed = 10;
	} else {
		return -1;
	}
	return 0;
}

const char *phy_mode_text(const struct phy_mode *mode, char *buf, unsigned size)
{
	snprintf(buf, size, "%u Mb/s %s duplex (%s)", (unsigned)mode->speed, mode->full_duplex ? "full" : "half",
		 mode->autoneg ? "auto-negotiated" : "forced");
	return buf;
}

int phy_id_valid(uint16_t id1, uint16_t id2)
{
	return !(id1 == 0xffffu && id2 == 0xffffu) && !(id1 == 0 && id2 == 0);
}
