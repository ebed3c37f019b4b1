/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * What a clause 22 PHY's registers say about its link: up or down, the speed and duplex it runs at
 * (auto-negotiated, IEEE 802.3 Annex 28B.3 priority, or forced through BMCR). Pure C over register
 * values: built for the target and for host tests.
 */
#ifndef ETHDAQ_PHY_MODE_H
#define ETHDAQ_PHY_MODE_H

#include <stdint.h>

/* Clause 22 registers (IEEE 802.3 22.2.4, 28.2.4, 40.5) and the bits we read. */
enum {
	PHY_BMCR = 0, PHY_BMSR = 1, PHY_ID1 = 2, PHY_ID2 = 3, PHY_ANAR = 4, PHY_ANLPAR = 5,
	PHY_GBCR = 9, PHY_GBSR = 10,
};
#define PHY_BMCR_SPEED_LSB  0x2000u
#define PHY_BMCR_ANENABLE   0x1000u
#define PHY_BMCR_FULLDPLX   0x0100u
#define PHY_BMCR_SPEED_MSB  0x0040u
#define PHY_BMSR_ESTATEN    0x0100u  /* 1000BASE-T registers (9, 10, 15) exist. */
#define PHY_BMSR_ANEGCOMPLETE 0x0020u
#define PHY_BMSR_LSTATUS    0x0004u
#define PHY_ADV_10HALF      0x0020u  /* ANAR, ANLPAR */
#define PHY_ADV_10FULL      0x0040u
#define PHY_ADV_100HALF     0x0080u
#define PHY_ADV_100FULL     0x0100u
#define PHY_ADV_1000HALF    0x0100u  /* GBCR */
#define PHY_ADV_1000FULL    0x0200u
#define PHY_LPA_1000HALF    0x0400u  /* GBSR */
#define PHY_LPA_1000FULL    0x0800u

struct phy_regs {
	uint16_t bmcr, bmsr, anar, anlpar, gbcr, gbsr;  /* gbcr, gbsr: 0 without PHY_BMSR_ESTATEN. */
};

struct phy_mode {
	uint16_t speed;        /* Mb/s: 10, 100, 1000; 0 when nothing resolves (link down). */
	uint8_t  full_duplex;
	uint8_t  autoneg;      /* 1: negotiated; 0: forced by BMCR. */
};

/* Resolve the mode of an up link from its registers. Returns 0, or -1 when auto-negotiation is on
 * but not complete or the two ends share no mode (mode->speed 0). */
int phy_resolve(const struct phy_regs *r, struct phy_mode *mode);

/* "1000 Mb/s full duplex (auto-negotiated)" into buf (at least 48 bytes). */
const char *phy_mode_text(const struct phy_mode *mode, char *buf, unsigned size);

/* An MDIO address answers when its ID registers are neither all ones (nobody drives the line)
 * nor all zeros. */
int phy_id_valid(uint16_t id1, uint16_t id2);

#endif
