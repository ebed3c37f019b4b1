/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include <stdio.h>
#include <string.h>

#include <generated/csr.h>
#include <generated/soc.h>

#include "probe.h"

#ifdef CSR_PROBES_BASE

/* The probes' classes, in the order of gateware/probe.py's TX_CLASSES and RX_CLASSES, as the
 * protocol numbers them. */
static const uint8_t tx_class[] = { CTL_PROBE_TX_LAUNCH, CTL_PROBE_TX_CPU, CTL_PROBE_TX_BULK };
static const uint8_t rx_class[] = { CTL_PROBE_RX_FASTTRACK };
_Static_assert(sizeof(tx_class) == ETHDAQ_PROBE_TX_CLASSES && sizeof(rx_class) == ETHDAQ_PROBE_RX_CLASSES,
	       "the gateware's probe classes and the firmware's disagree");

/* A selected class's words reach the CSRs a few cycles of the probe's clock after the select (a
 * synchroniser, then a register refreshed between results): wait well over that. */
#define SELECT_SETTLE_LOOPS 64u

static void settle(void)
{
	for (volatile uint32_t k = 0; k < SELECT_SETTLE_LOOPS; k++)
		;
}

/* One probe's accessors, so the transmit and the receive probe share the reading code. */
struct probe_csrs {
	void     (*select)(uint32_t);
	void     (*bin)(uint32_t);
	uint32_t (*count)(void);
	uint64_t (*sum)(void);
	uint64_t (*sumsq)(void);
	uint32_t (*smallest)(void);   /* Not min/max: LiteX's hw/common.h defines those as macros. */
	uint32_t (*largest)(void);
	uint32_t (*bin_count)(void);
	uint32_t (*unpaired)(void);
	uint32_t (*overflows)(void);
	void     (*clear)(uint32_t);
};

#define PROBE_CSRS(p) { p##_select_write, p##_bin_write, p##_count_read, p##_sum_read, p##_sumsq_read, p##_min_read, \
	p##_max_read, p##_bin_count_read, p##_unpaired_read, p##_overflows_read, p##_clear_write }
static const struct probe_csrs tx = PROBE_CSRS(probes_tx);
static const struct probe_csrs rx = PROBE_CSRS(probes_rx);
#ifdef ETHDAQ_PROBE_MAILBOX_CLASSES
/* Receive through LiteEth to the control mailbox (gateware/probe.py MAILBOX_CLASSES), in sys. */
static const uint8_t mailbox_class[] = { CTL_PROBE_RX_UDP, CTL_PROBE_RX_CPU };
_Static_assert(sizeof(mailbox_class) == ETHDAQ_PROBE_MAILBOX_CLASSES,
	       "the gateware's mailbox probe classes and the firmware's disagree");
static const struct probe_csrs mailbox = PROBE_CSRS(probes_mailbox);
#endif

/* The statistics change while a frame's latency is written back, and the sum spans two CSR
 * words: two reads that agree are a value that was there. A class updated on every read (frames
 * faster than the loop) keeps the last read: each word from within a few cycles. */
static void read_class(const struct probe_csrs *p, unsigned index, struct ctl_probe_class *c)
{
	p->select(index);
	settle();
	for (int tries = 0; tries < 16; tries++) {
		uint32_t n = p->count();
		uint64_t s = p->sum(), q = p->sumsq();
		uint32_t lo = p->smallest(), hi = p->largest();
		c->count = p->count();
		c->sum   = p->sum();
		c->sumsq = p->sumsq();
		c->min   = (uint16_t)p->smallest();
		c->max   = (uint16_t)p->largest();
		if (n == c->count && s == c->sum && q == c->sumsq && lo == c->min && hi == c->max)
			break;
	}
	for (unsigned k = 0; k < CTL_PROBE_NBINS; k++) {
		uint32_t v;
		p->bin(k);
		settle();
		for (int tries = 0; tries < 16; tries++) {
			v = p->bin_count();
			if (v == p->bin_count())
				break;
		}
		c->bins[k] = v;
	}
}

int probe_present(void) { return 1; }

void probe_init(void)
{
	printf("  probes   : latency of every frame, transmit (launch, cpu, bulk) and receive (fast-track, "
	       "UDP port, CPU), %u ps cycles\n", (unsigned)ETHDAQ_PROBE_CYCLE_PS);
}

int probe_op(int clear, struct ctl_probe_report *r)
{
	if (clear) {
		tx.clear(1);
		rx.clear(1);
#ifdef ETHDAQ_PROBE_MAILBOX_CLASSES
		mailbox.clear(1);
#endif
		return 0;
	}
	r->cycle_ps = ETHDAQ_PROBE_CYCLE_PS;
	for (unsigned i = 0; i < sizeof(tx_class); i++) {
#ifndef CSR_LAUNCHER_BASE
		if (tx_class[i] == CTL_PROBE_TX_LAUNCH)
			continue;  /* No launcher in this build: nothing to measure. */
#endif
		read_class(&tx, i, &r->classes[tx_class[i]]);
		r->present |= (uint8_t)(1u << tx_class[i]);
	}
#ifdef ETHDAQ_PROBE_FASTTRACK
	for (unsigned i = 0; i < sizeof(rx_class); i++) {
		read_class(&rx, i, &r->classes[rx_class[i]]);
		r->present |= (uint8_t)(1u << rx_class[i]);
	}
#endif
	r->tx_unpaired  = tx.unpaired();
	r->tx_overflows = tx.overflows();
	r->rx_unpaired  = rx.unpaired();
	r->rx_overflows = rx.overflows();
#ifdef ETHDAQ_PROBE_MAILBOX_CLASSES
	for (unsigned i = 0; i < sizeof(mailbox_class); i++) {
		read_class(&mailbox, i, &r->classes[mailbox_class[i]]);
		r->present |= (uint8_t)(1u << mailbox_class[i]);
	}
	r->rx_unpaired  += mailbox.unpaired();
	r->rx_overflows += mailbox.overflows();
#endif
	return 0;
}

#else

int  probe_present(void) { return 0; }
void probe_init(void) {}
int  probe_op(int clear, struct ctl_probe_report *r) { (void)clear; (void)r; return CTL_ERR_UNSUPPORTED; }

#endif
