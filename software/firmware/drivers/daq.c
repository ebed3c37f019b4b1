/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include <generated/csr.h>
#include <generated/soc.h>

#include "daq.h"
#include "events.h"
#include "netaddr.h"

#ifdef CSR_STREAMER_BASE

static const struct ctlport_stats *port_stats;

static uint64_t mac_to_u64(const uint8_t mac[6])
{
	uint64_t v = 0;
	for (int i = 0; i < 6; i++)
		v = (v << 8) | mac[i];
	return v;
}

static void mac_from_u64(uint8_t mac[6], uint64_t v)
{
	for (int i = 5; i >= 0; i--) {
		mac[i] = (uint8_t)v;
		v >>= 8;
	}
}

/* Give ARP a moment before the run starts, so the first datagrams need not wait (and their
 * samples need not be dropped). Bounded: an unanswered destination is reported by STATUS
 * (CTL_DST_UNREACHABLE) while the run goes on, never a hang of the control loop. */
#define DST_WAIT_POLLS (CONFIG_CLOCK_FREQUENCY/1000u/16u)  /* About 1 ms: >= 16 cycles per poll. */

/* Poll the streamer's status until one of `mask`'s bits is set (set = 1) or all are clear
 * (set = 0), for at most DST_WAIT_POLLS reads. */
static void wait_status(uint32_t mask, int set)
{
	for (uint32_t i = 0; i < DST_WAIT_POLLS; i++)
		if (((streamer_status_read() & mask) != 0) == set)
			return;
}

static void wait_destination(void)
{
	wait_status((1u << CSR_STREAMER_STATUS_DST_VALID_OFFSET) | (1u << CSR_STREAMER_STATUS_UNREACHABLE_OFFSET), 1);
}

/* Per-stream counters (gateware/streamstats.py): datagrams and bytes since power-on, counted in
 * the transmit clock's domain; STREAMS reports them from the run's start. */
static uint64_t base_datagrams[ETHDAQ_NCHANNELS], base_bytes[ETHDAQ_NCHANNELS];
static uint8_t  run_enable = (uint8_t)((1u << ETHDAQ_NCHANNELS) - 1u);  /* The gateware's reset value. */
#define COUNTER_MASK ((1ull << ETHDAQ_STREAM_COUNTER_BITS) - 1u)

#ifdef CSR_STREAMER_COUNTERS_SELECT_ADDR
/* The selected stream's totals reach the CSRs a few transmit-clock cycles after the select (a
 * synchroniser, then a register refreshed between datagrams): wait well over that, at the
 * slowest transmit clock (25 MHz at 100 Mb/s) against the sys clock. */
#define SELECT_SETTLE_LOOPS 64u

static void read_counters(unsigned i, uint64_t *datagrams, uint64_t *bytes, uint64_t *dropped)
{
	streamer_counters_select_write(i);
	for (volatile uint32_t k = 0; k < SELECT_SETTLE_LOOPS; k++)
		;
	/* Read without a handshake across clock domains, and in several CSR words: a read may catch a
	 * total being written. Two reads that agree are a value that was there. */
	for (int tries = 0; tries < 16; tries++) {
		uint64_t d = streamer_counters_datagrams_read(), b = streamer_counters_bytes_read();
		uint64_t x = streamer_counters_dropped_read();
		*datagrams = streamer_counters_datagrams_read();
		*bytes     = streamer_counters_bytes_read();
		*dropped   = streamer_counters_dropped_read();
		if (d == *datagrams && b == *bytes && x == *dropped)
			return;
	}
	/* Still changing after 16 tries (drops counted every cycle): the last read, each word a
	 * value from within a few cycles. */
}
#else
static void read_counters(unsigned i, uint64_t *datagrams, uint64_t *bytes, uint64_t *dropped)
{
	(void)i;
	*datagrams = *bytes = *dropped = 0;
}
#endif

static int streams(struct ctl_stream_counters *s, uint32_t *run)
{
	unsigned n = ETHDAQ_NCHANNELS < CTL_MAX_STREAMS ? ETHDAQ_NCHANNELS : CTL_MAX_STREAMS;
	for (unsigned i = 0; i < n; i++) {
		read_counters(i, &s[i].datagrams, &s[i].bytes, &s[i].dropped);
		/* The gateware's counters are 48 bits wide and wrap. */
		s[i].datagrams = (s[i].datagrams - base_datagrams[i]) & COUNTER_MASK;
		s[i].bytes     = (s[i].bytes - base_bytes[i]) & COUNTER_MASK;
		s[i].flags      = (run_enable >> i & 1u) ? CTL_STREAM_ENABLED : 0;
	}
	*run = streamer_run_read();
	return (int)n;
}

/* Datagrams of the last run still queued (its stop flushes each channel's partial datagram) are
 * the last run's: let them go before the new run's counts start. Bounded, like the ARP wait. */
static void wait_sent(void)
{
	wait_status(1u << CSR_STREAMER_STATUS_BUSY_OFFSET, 0);
}

/* The streamer's flush setting for a flush time in ns: it closes a partial datagram `flush` + 1
 * cycles after its last sample, so at most `ns` later (rounded down to whole cycles, at least 2). */
static uint32_t flush_cycles(uint32_t ns)
{
	uint64_t cycles = (uint64_t)ns * CONFIG_CLOCK_FREQUENCY / 1000000000u;

	if (ns == 0)
		return 0;
	return cycles < 2 ? 1u : (uint32_t)(cycles - 1u);
}

static int stream_start(const struct ctl_stream_cfg *cfg, uint32_t *run)
{
	uint64_t dropped;

	if (streamer_status_read() & (1u << CSR_STREAMER_STATUS_RUNNING_OFFSET))
		return CTL_ERR_BUSY;
	wait_sent();
	for (unsigned i = 0; i < ETHDAQ_NCHANNELS; i++)
		read_counters(i, &base_datagrams[i], &base_bytes[i], &dropped);
	run_enable = cfg->enable;
	/* The next hop first: the resolver asks for it as soon as the destination is written. */
	streamer_next_hop_write(netaddr_next_hop(cfg->dst_ip));
	streamer_dst_ip_write(cfg->dst_ip);
	streamer_dst_port_write(cfg->dst_port);
	streamer_payload_write(cfg->payload);
	streamer_enable_write(cfg->enable);
	streamer_backpressure_write(cfg->backpressure);
	streamer_gap_write(cfg->gap);
	streamer_flush_write(flush_cycles(cfg->flush));
	streamer_dst_mac_write(mac_to_u64(cfg->dst_mac));
	streamer_mac_mode_write(mac_to_u64(cfg->dst_mac) != 0);
	wait_destination();
	streamer_control_write(1u << CSR_STREAMER_CONTROL_START_OFFSET);
	*run = streamer_run_read();
	return 0;
}

static int stream_stop(uint32_t *run)
{
	streamer_control_write(1u << CSR_STREAMER_CONTROL_STOP_OFFSET);
	*run = streamer_run_read();
	return 0;
}

/* One emulator per channel (up to the protocol's 8), each with its own CSRs: apply the same
 * settings to all. */
#define EMU_APPLY(n) do { \
	emu##n##_mode_write(cfg->mode); emu##n##_rate_write(cfg->rate); \
	emu##n##_seed_write(cfg->seed + n); } while (0)

static int emulator(const struct ctl_emulator_cfg *cfg)
{
#ifdef CSR_EMU0_BASE
	EMU_APPLY(0);
#endif
#ifdef CSR_EMU1_BASE
	EMU_APPLY(1);
#endif
#ifdef CSR_EMU2_BASE
	EMU_APPLY(2);
#endif
#ifdef CSR_EMU3_BASE
	EMU_APPLY(3);
#endif
#ifdef CSR_EMU4_BASE
	EMU_APPLY(4);
#endif
#ifdef CSR_EMU5_BASE
	EMU_APPLY(5);
#endif
#ifdef CSR_EMU6_BASE
	EMU_APPLY(6);
#endif
#ifdef CSR_EMU7_BASE
	EMU_APPLY(7);
#endif
#ifndef CSR_EMU0_BASE
	(void)cfg;
	return CTL_ERR_UNSUPPORTED;
#endif
	return 0;
}

#ifdef CSR_STREAMER_DATAGRAMS_ADDR
static void totals(uint64_t *datagrams, uint64_t *dropped)
{
	*datagrams = streamer_datagrams_read();
	*dropped   = streamer_drop_count_read();
}

static void totals_init(void)
{
}
#else
/* STATUS's totals from the per-stream counters: datagrams since this boot (the counters run
 * from power-on, so from each stream's count at boot) and samples dropped this run. */
static uint64_t boot_datagrams[ETHDAQ_NCHANNELS];

static void totals(uint64_t *datagrams, uint64_t *dropped)
{
	uint64_t d, b, x;

	*datagrams = *dropped = 0;
	for (unsigned i = 0; i < ETHDAQ_NCHANNELS; i++) {
		read_counters(i, &d, &b, &x);
		*datagrams += (d - boot_datagrams[i]) & COUNTER_MASK;
		*dropped   += x;
	}
}

static void totals_init(void)
{
	uint64_t b, x;

	for (unsigned i = 0; i < ETHDAQ_NCHANNELS; i++)
		read_counters(i, &boot_datagrams[i], &b, &x);
}
#endif

static void status(struct ctl_status *st)
{
	st->running   = (streamer_status_read() >> CSR_STREAMER_STATUS_RUNNING_OFFSET) & 1u;
	st->run       = streamer_run_read();
	totals(&st->datagrams, &st->dropped);
	st->port_rx_dropped = event_count(EVENT_CTLPORT_RX_DROPPED);
	st->port_tx_dropped = event_count(EVENT_CTLPORT_TX_DROPPED) + port_stats->tx_too_long + port_stats->tx_timeout;
	uint32_t s = streamer_status_read();
	st->arp_timeouts = event_count(EVENT_STREAMER_ARP_TIMEOUTS);
	st->dst_flags    = (uint8_t)((s & (1u << CSR_STREAMER_STATUS_DST_VALID_OFFSET) ? CTL_DST_VALID : 0) |
	                             (s & (1u << CSR_STREAMER_STATUS_UNREACHABLE_OFFSET) ? CTL_DST_UNREACHABLE : 0));
	mac_from_u64(st->dst_mac, streamer_dst_mac_status_read());
	st->stale        = event_count(EVENT_STREAMER_STALE);
	st->dst_mac_changes = event_count(EVENT_STREAMER_DST_MAC_CHANGES);
	st->arp_refused     = event_count(EVENT_STREAMER_ARP_REFUSED);
	st->rx_fcs_errors      = event_count(EVENT_ETH_FCS_ERRORS);
	st->rx_preamble_errors = event_count(EVENT_ETH_PREAMBLE_ERRORS);
}

void daq_ops(struct ctl_ops *ops, const struct ctlport_stats *port)
{
	port_stats        = port;
	totals_init();
	ops->stream_start = stream_start;
	ops->stream_stop  = stream_stop;
	ops->emulator     = emulator;
	ops->status       = status;
	ops->streams      = streams;
}

#else

void daq_ops(struct ctl_ops *ops, const struct ctlport_stats *port)
{
	(void)port;
	ops->stream_start = 0;
	ops->stream_stop  = 0;
	ops->emulator     = 0;
	ops->status       = 0;
	ops->streams      = 0;
}

#endif
