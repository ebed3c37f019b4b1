/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include <stdio.h>
#include <string.h>

#include <generated/soc.h>
#include <generated/ctl_protocol.h>

#include "drivers/mdio.h"
#include "phy.h"
#include "phy_mode.h"

/* What the main loop is doing with the PHY: finding it (reading the ID registers of each MDIO
 * address in turn), waiting for the next look, or reading the registers of one look. */
enum state {
	S_NONE,        /* No MDIO, or no PHY answered: nothing to watch. */
	S_SCAN_ID1, S_SCAN_ID2,
	S_WAIT,
	S_BMSR_LATCHED, S_BMSR_NOW,
	S_MODE,        /* Reading mode_regs[mode_reg]. */
};

static struct {
	enum state state;
	uint8_t  address;
	uint16_t id1;
	uint32_t id;
	uint8_t  known;    /* A look has completed: up/down is the PHY's. */
	uint8_t  up;
	uint8_t  lost;     /* This look's latched BMSR says the link dropped since the last one. */
	uint32_t losses;
	struct phy_regs regs;
	uint8_t  mode_reg;
	struct phy_mode mode;
	uint8_t  mismatch;
	uint64_t next_ns;
} p;

/* What an up link's speed and duplex come from, in the order they are read; a 10/100 PHY (BMSR
 * without extended status) has only the first MODE_REGS_10_100. */
static const uint8_t mode_regs[] = { PHY_BMCR, PHY_ANAR, PHY_ANLPAR, PHY_GBCR, PHY_GBSR };
static uint16_t *const mode_dst[] = { &p.regs.bmcr, &p.regs.anar, &p.regs.anlpar, &p.regs.gbcr, &p.regs.gbsr };
#define MODE_REGS_10_100 3u
_Static_assert(sizeof(mode_regs) == sizeof(mode_dst) / sizeof(mode_dst[0]), "one place per register");

static void read_reg(enum state next, uint8_t reg)
{
	p.state = next;
	mdio_start_read(p.address, reg);
}

void phy_init(void)
{
	memset(&p, 0, sizeof(p));
	if (!mdio_present()) {
		printf("phy: this build has no MDIO pins: link state unknown\n");
		p.state = S_NONE;
		return;
	}
#ifdef ETHDAQ_PHY_ADDRESS
	p.address = ETHDAQ_PHY_ADDRESS;  /* The board's (several PHYs share its MDIO). */
#else
	p.address = 1;
#endif
	read_reg(S_SCAN_ID1, PHY_ID1);
}

/* Scan order: 1 to 31, then 0. Many PHYs also answer at 0 as a broadcast address: on a bus with
 * two PHYs, reading 0 first could have both drive the line. */
static int next_address(void)
{
#ifdef ETHDAQ_PHY_ADDRESS
	return 0;
#else
	if (p.address == 0)
		return 0;
	p.address = (uint8_t)((p.address + 1u) & 31u);
	return 1;
#endif
}

static void link_up(void)
{
	char text[64];

	p.up = 1;
	p.mismatch = 0;
	if (phy_resolve(&p.regs, &p.mode) != 0) {
		printf("phy: link up, mode unresolved (BMCR %04x BMSR %04x ANAR %04x ANLPAR %04x GBCR %04x GBSR %04x)\n",
		       p.regs.bmcr, p.regs.bmsr, p.regs.anar, p.regs.anlpar, p.regs.gbcr, p.regs.gbsr);
		return;
	}
	printf("phy: link up, %s\n", phy_mode_text(&p.mode, text, sizeof(text)));
	if (p.mode.speed != ETHDAQ_LINK_MBPS) {
		p.mismatch = 1;
		printf("phy: WARNING: this build's PHY interface runs at %u Mb/s only: no frames pass at %u Mb/s\n",
		       (unsigned)ETHDAQ_LINK_MBPS, (unsigned)p.mode.speed);
	}
}

void phy_poll(uint64_t now_ns)
{
	uint16_t v;

	if (p.state == S_NONE)
		return;
	if (p.state == S_WAIT) {
		if (now_ns != 0 && now_ns < p.next_ns)
			return;
		p.next_ns = now_ns + (uint64_t)ETHDAQ_PHY_POLL_MS * 1000000u;
		/* BMSR twice: its link bit latches low, so the first read tells whether the link dropped
		 * since the last look (even if it is back), the second whether it is up now. */
		read_reg(S_BMSR_LATCHED, PHY_BMSR);
		return;
	}
	if (mdio_step())
		return;
	v = mdio_result();
	switch (p.state) {
	case S_SCAN_ID1:
		p.id1 = v;
		read_reg(S_SCAN_ID2, PHY_ID2);
		break;
	case S_SCAN_ID2:
		if (phy_id_valid(p.id1, v)) {
			p.id = (uint32_t)p.id1 << 16 | v;
			printf("phy: PHY at MDIO address %u, id 0x%08lx\n", (unsigned)p.address, (unsigned long)p.id);
			p.state = S_WAIT;
			p.next_ns = now_ns;
		} else if (next_address()) {
			read_reg(S_SCAN_ID1, PHY_ID1);
		} else {
#ifdef ETHDAQ_PHY_ADDRESS
			printf("phy: no PHY answers at MDIO address %u: link state unknown\n", (unsigned)p.address);
#else
			printf("phy: no PHY answers on MDIO (addresses 0 to 31): link state unknown\n");
#endif
			p.state = S_NONE;
		}
		break;
	case S_BMSR_LATCHED:
		p.lost = p.known && p.up && !(v & PHY_BMSR_LSTATUS);
		read_reg(S_BMSR_NOW, PHY_BMSR);
		break;
	case S_BMSR_NOW:
		p.regs.bmsr = v;
		if (p.lost) {
			p.losses++;
			p.up = 0;
			printf("phy: link %s (losses since boot: %lu)\n",
			       (v & PHY_BMSR_LSTATUS) ? "lost and back since the last look" : "down", (unsigned long)p.losses);
		} else if (!p.known && !(v & PHY_BMSR_LSTATUS)) {
			printf("phy: link down\n");
		}
		p.known = 1;
		if ((v & PHY_BMSR_LSTATUS) && !p.up) {
			/* Up: how fast, which duplex. */
			p.mode_reg = 0;
			p.regs.gbcr = p.regs.gbsr = 0;  /* Stay 0 on a 10/100 PHY. */
			read_reg(S_MODE, mode_regs[0]);
		} else {
			p.state = S_WAIT;
		}
		break;
	case S_MODE:
		*mode_dst[p.mode_reg] = v;
		if (++p.mode_reg < ((p.regs.bmsr & PHY_BMSR_ESTATEN) ? sizeof(mode_regs) : MODE_REGS_10_100)) {
			read_reg(S_MODE, mode_regs[p.mode_reg]);
		} else {
			link_up();
			p.state = S_WAIT;
		}
		break;
	default:
		p.state = S_WAIT;
		break;
	}
}

void phy_link(struct ctl_link *l)
{
	memset(l, 0, sizeof(*l));
	l->phy_address = CTL_NO_PHY;
	if (p.id == 0)
		return;
	l->phy_address = p.address;
	l->phy_id = p.id;
	l->losses = p.losses;
	if (!p.known)
		return;
	l->flags = CTL_LINK_PHY;
	if (p.up) {
		l->flags |= CTL_LINK_UP;
		l->speed = p.mode.speed;
		if (p.mode.full_duplex)
			l->flags |= CTL_LINK_FULL_DUPLEX;
		if (p.mode.autoneg)
			l->flags |= CTL_LINK_AUTONEG;
		if (p.mismatch)
			l->flags |= CTL_LINK_MISMATCH;
	}
}
