/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include <generated/csr.h>
#include <generated/soc.h>

#include "mdio.h"

#ifdef CSR_ETHPHY_MDIO_W_ADDR

#define MDC 0x01u  /* ethphy_mdio_w: LiteEthPHYMDIO's fields */
#define OE  0x02u
#define DO  0x04u

/* A frame, oldest bit first (IEEE 802.3 22.2.4.5): 32 ones of preamble, ST 01, OP (10 read, 01
 * write), PHYAD, REGAD, turnaround (10 on a write; released on a read, the PHY drives its second
 * bit), 16 bits of data; then one clock with the line released. */
#define FRAME_BITS 65u
#define DRIVEN_READ 46u  /* A read drives preamble to REGAD, then listens. */

static struct {
	uint8_t  busy, reading, bit;
	uint32_t header;   /* ST, OP, PHYAD, REGAD, TA, data: the 32 bits after the preamble. */
	uint16_t result;
} m;

/* MDC high and low each last at least 160 ns (22.3.4): about 200 ns of loop at the sys clock,
 * beside the CSR write itself. */
#define HALF_PERIOD_LOOPS (CONFIG_CLOCK_FREQUENCY / 20000000u + 1u)

static void half_period(void)
{
	for (volatile uint32_t i = 0; i < HALF_PERIOD_LOOPS; i++)
		;
}

int mdio_present(void)
{
	return 1;
}

static void start(uint8_t op, uint8_t phy, uint8_t reg, uint16_t value)
{
	m.header = (0x1u << 30) | ((uint32_t)op << 28) | ((uint32_t)(phy & 0x1fu) << 23) |
		   ((uint32_t)(reg & 0x1fu) << 18) | (0x2u << 16) | value;
	m.reading = op == 0x2u;
	m.bit = 0;
	m.result = 0;
	m.busy = 1;
}

void mdio_start_read(uint8_t phy, uint8_t reg)
{
	start(0x2u, phy, reg, 0);
}

void mdio_start_write(uint8_t phy, uint8_t reg, uint16_t value)
{
	start(0x1u, phy, reg, value);
}

/* Bits per mdio_step(): a frame in 5 calls. A pass of the main loop takes thousands of cycles, so
 * one bit per pass made a frame take ~4 ms of simulated time; 16 bits hold the loop up for at
 * most ~1,600 cycles (a bit: three CSR writes and two half periods). */
#define BITS_PER_STEP 16u

static void bit(void)
{
	uint32_t out;

	if (m.bit < 32u) {
		out = OE | DO;
	} else if (m.bit < FRAME_BITS - 1u && !(m.reading && m.bit >= DRIVEN_READ)) {
		out = OE | (((m.header >> (63u - m.bit)) & 1u) ? DO : 0);
	} else {
		out = 0;  /* Released: the PHY drives (a read's turnaround and data), or idle. */
	}
	ethphy_mdio_w_write(out);
	half_period();
	/* The PHY sets each bit of its data up at most 300 ns after MDC's rising edge (22.3.4): two
	 * half periods later, just before the next rising edge, it is there. */
	if (m.reading && m.bit >= DRIVEN_READ + 2u && m.bit < FRAME_BITS - 1u)
		m.result = (uint16_t)((m.result << 1) | (ethphy_mdio_r_read() & 1u));
	ethphy_mdio_w_write(out | MDC);  /* The PHY samples on the rising edge. */
	half_period();
	ethphy_mdio_w_write(out);
	if (++m.bit == FRAME_BITS)
		m.busy = 0;
}

int mdio_step(void)
{
	for (unsigned i = 0; i < BITS_PER_STEP && m.busy; i++)
		bit();
	return m.busy;
}

uint16_t mdio_result(void)
{
	return m.result;
}

#else

int      mdio_present(void) { return 0; }
void     mdio_start_read(uint8_t phy, uint8_t reg) { (void)phy; (void)reg; }
void     mdio_start_write(uint8_t phy, uint8_t reg, uint16_t value) { (void)phy; (void)reg; (void)value; }
int      mdio_step(void) { return 0; }
uint16_t mdio_result(void) { return 0xffffu; }

#endif
