/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include <stdio.h>
#include <string.h>

#include <generated/csr.h>
#include <generated/soc.h>

#include "drivers/console.h"
#include "protocol/ctl.h"
#include "drivers/ctlport.h"
#include "drivers/events.h"
#include "ptpsvc.h"
#include "ptp/ptp_hwts.h"

#ifdef CSR_PTP_BASE

#define PTP_MCAST_IP     0xE0000181u   /* 224.0.1.129 */
#define PTP_EVENT_PORT   319
#define PTP_GENERAL_PORT 320
#define NSEC_PER_SEC     1000000000u
#define PTP_MSG_MAX      128           /* Announce is 64 bytes; room for TLVs we ignore */

static struct ptp_port port;
static struct ptpsvc_counters cnt;
static uint8_t last_state, last_servo;
static uint64_t next_status_ns;
static uint64_t poll_now_ns;  /* The uptime at the last ptpsvc_poll(). */

/* Monotonic time ------------------------------------------------------------------------------ */

/* The stack's timers need a time that is never stepped. Instead of a separate 64-bit uptime
 * counter (LUTs the colorlight_i5 does not have), the PTP clock minus every step we applied: it
 * is slewed by at most the servo's 500 ppm, which timers do not mind; a coarse `set` makes it
 * jump back by the CPU's few microseconds between latch and set, which they do not mind either. */
static int64_t steps_total_ns;

static void clock_read(void *ctx, struct ptp_time *now);

static uint64_t uptime_ns(void)
{
	struct ptp_time t;
	clock_read(NULL, &t);
	return (uint64_t)((int64_t)t.sec * NSEC_PER_SEC + t.nsec - steps_total_ns);
}

#define NS_PER_CYCLE_INT  ((uint64_t)(1000000000.0 / CONFIG_CLOCK_FREQUENCY))

/* Clock ---------------------------------------------------------------------------------------- */

#define CONTROL(field) (1u << CSR_PTP_CONTROL_##field##_OFFSET)

static int clock_wait_idle(void)
{
	unsigned spins = 0;
	while ((ptp_status_read() >> CSR_PTP_STATUS_BUSY_OFFSET) & 1u)
		if (++spins > 100000)
			return -1;
	return 0;
}

static void clock_read(void *ctx, struct ptp_time *now)
{
	(void)ctx;
	ptp_control_write(CONTROL(LATCH));
	while ((ptp_status_read() >> CSR_PTP_STATUS_LATCHING_OFFSET) & 1u)
		;
	now->sec  = ptp_latched_seconds_read();
	now->nsec = ptp_latched_nanoseconds_read();
}

static int clock_step(void *ctx, int64_t offset_ns)
{
	uint32_t rejected = ptp_rejected_read();
	int64_t offset_step = offset_ns;

	if (clock_wait_idle())
		return -1;
	if (offset_ns > -(int64_t)NSEC_PER_SEC && offset_ns < (int64_t)NSEC_PER_SEC) {
		/* Exact: the offset is added inside one increment, whatever the CPU's latency. */
		ptp_offset_write((uint32_t)(int32_t)offset_ns);
		ptp_control_write(CONTROL(ADD));
	} else {
		/* Coarse: set now + offset + the set's own latency; the CPU's few microseconds
		 * between latch and set remain, and the servo's next sample takes them out. */
		struct ptp_time now;
		int64_t rem, sec;
		clock_read(ctx, &now);
		offset_ns += (int64_t)now.nsec + (int64_t)PTP_SET_LATENCY * (int64_t)(NS_PER_CYCLE_INT);
		sec = (int64_t)now.sec + ptp_div64(offset_ns, NSEC_PER_SEC, &rem);
		if (rem < 0) {
			rem += NSEC_PER_SEC;
			sec -= 1;
		}
		if (sec < 0)
			return -1;
		ptp_set_seconds_write((uint64_t)sec);
		ptp_set_nanoseconds_write((uint32_t)rem);
		ptp_control_write(CONTROL(SET));
	}
	if (clock_wait_idle() || ptp_rejected_read() != rejected) {
		cnt.clock_rejected++;
		return -1;
	}
	steps_total_ns += offset_step;
	return 0;
}

static int clock_adjfreq(void *ctx, int64_t scaled_ppb)
{
	/* adj (2^-F ns per cycle) = scaled_ppb * ADJ_PER_PPB_Q16 / 2^32; |scaled_ppb| < 2^37 and the
	 * constant < 2^24, so the product fits in 63 bits. */
	int64_t adj = (scaled_ppb * (int64_t)PTP_ADJ_PER_PPB_Q16) >> 32;
	(void)ctx;
	if (adj > INT32_MAX || adj < INT32_MIN)
		return -1;
	ptp_adj_write((uint32_t)(int32_t)adj);
	return 0;
}

/* Transports ----------------------------------------------------------------------------------- */

#if defined(ETHDAQ_PTP_L2)
static uint8_t msg_buf[PTP_MSG_MAX];
static const uint8_t ptp_l2_mcast[6] = { 0x01, 0x1B, 0x19, 0x00, 0x00, 0x00 };

static int send(void *ctx, enum ptp_channel channel, const uint8_t *msg, size_t len)
{
	size_t i;
	unsigned spins = 0;
	uint64_t dst = 0;
	(void)ctx;
	(void)channel;
	if (len == 0 || len > ETHDAQ_PTP_TX_MAX) {
		cnt.tx_too_long++;
		return -1;
	}
	while (ptp_l2_tx_busy_read())
		if (++spins > 1000000) {
			cnt.tx_timeout++;
			return -1;
		}
	for (i = 0; i < 6; i++)
		dst = dst << 8 | ptp_l2_mcast[i];
	for (i = 0; i < len; i++)
		ptp_l2_tx_data_write(msg[i]);
	ptp_l2_tx_mac_write(dst);
	ptp_l2_tx_send_write(1);
	return 0;
}

/* Next received PTP message from the L2 port (into msg_buf); returns its length, 0 if none. */
static size_t receive(enum ptp_channel *channel)
{
	size_t i, len;
	if (!ptp_l2_rx_ready_read())
		return 0;
	len = ptp_l2_rx_length_read();
	if (ptp_l2_rx_truncated_read() || len > sizeof(msg_buf)) {
		cnt.rx_truncated++;
		ptp_l2_rx_consume_write(1);
		return 0;
	}
	for (i = 0; i < len; i++) {
		msg_buf[i] = (uint8_t)ptp_l2_rx_data_read();
		ptp_l2_rx_next_write(1);
	}
	ptp_l2_rx_consume_write(1);
	/* One channel on Ethernet: event messages are those with messageType < 8. */
	*channel = len > 0 && (msg_buf[0] & 0x0f) < 8 ? PTP_CHANNEL_EVENT : PTP_CHANNEL_GENERAL;
	return len;
}

#elif defined(ETHDAQ_PTP_UDP)

static struct ctlport_stats port_stats;  /* PTP's share of the mailbox's send/receive refusals */

/* PTP's ports share the control port's mailbox (DAQSoC): send from 319 or 320; main.c hands
 * what arrives on them to ptpsvc_input(). */
static int send(void *ctx, enum ptp_channel channel, const uint8_t *msg, size_t len)
{
	uint16_t p = channel == PTP_CHANNEL_EVENT ? PTP_EVENT_PORT : PTP_GENERAL_PORT;
	(void)ctx;
	if (len > ETHDAQ_PTP_TX_MAX) {
		port_stats.tx_too_long++;
		return -1;
	}
	return cpuport_send(&cpuport_ctl, p, PTP_MCAST_IP, p, msg, len, &port_stats);
}

#else
#error "the SoC has a PTP clock but no PTP transport (ETHDAQ_PTP_UDP or ETHDAQ_PTP_L2)"
#endif

/* Timestamps ----------------------------------------------------------------------------------- */

#define INFO_TYPE(info) ((info) & 0x0fu)
#define INFO_SEQ(info)  ((info) >> 16)

/* The units' corrections to the timestamp point (ptp_hwts.h): the SoC's, in ps. Units at 64 bits
 * (XGMII) keep the lane of each frame's /S/ (start_lane), and lane 4 adds its own. */
#ifdef CSR_PTP_RX_START_LANE_ADDR
static const struct ptp_hwts_corr rx_corr = PTP_HWTS_CORR(PTP_RX_CORRECTION_PS, PTP_RX_LANE4_PS);
static const struct ptp_hwts_corr tx_corr = PTP_HWTS_CORR(PTP_TX_CORRECTION_PS, PTP_TX_LANE4_PS);
#define RX_START_LANE() ptp_rx_start_lane_read()
#define TX_START_LANE() ptp_tx_start_lane_read()
#else
static const struct ptp_hwts_corr rx_corr = PTP_HWTS_CORR(PTP_RX_CORRECTION_PS, 0);
static const struct ptp_hwts_corr tx_corr = PTP_HWTS_CORR(PTP_TX_CORRECTION_PS, 0);
#define RX_START_LANE() 0u
#define TX_START_LANE() 0u
#endif

static int is_event(unsigned type)
{
	return type < 8;
}

/* The RX record of the event message in msg_buf: records come in wire order and a frame's record
 * is complete before the frame has passed the MAC and IP layers, so the record is normally at the
 * head already. Records of general messages and of frames that never reached us (bad FCS,
 * another transport) are popped on the way. */
static int rx_timestamp(const uint8_t *msg, size_t len, struct ptp_time *ts)
{
	unsigned type, spins;
	uint16_t seq;
	uint32_t source;

	if (len < 34)
		return 0;
	type   = msg[0] & 0x0f;
	seq    = (uint16_t)(msg[30] << 8 | msg[31]);
	source = (uint32_t)msg[26] << 24 | (uint32_t)msg[27] << 16 | (uint32_t)msg[28] << 8 | msg[29];
	for (spins = 0; spins < 64; spins++) {
		uint32_t info;
		if (!((ptp_rx_status_read() >> CSR_PTP_RX_STATUS_PENDING_OFFSET) & 1u))
			continue;  /* Still crossing into sys: give it a few more reads. */
		info = ptp_rx_info_read();
		if (INFO_TYPE(info) == type && INFO_SEQ(info) == seq && ptp_rx_source_read() == source) {
			int ok = ptp_hwts_correct(ts, ptp_rx_seconds_read(), ptp_rx_nanoseconds_read(),
			                          RX_START_LANE(), &rx_corr) == 0;
			ptp_rx_pop_write(1);
			if (!ok)
				cnt.rx_ts_missing++;
			return ok;
		}
		if (is_event(INFO_TYPE(info)))
			cnt.rx_ts_discarded++;
		ptp_rx_pop_write(1);
		spins = 0;
	}
	cnt.rx_ts_missing++;
	return 0;
}

/* RX records of general messages (Follow_Up, Delay_Resp, Announce, ...) are never needed: drop
 * them as soon as they reach the head, so that bursts of general messages cannot fill the record
 * FIFO ahead of the next event message. */
static void rx_drop_general(void)
{
	while (((ptp_rx_status_read() >> CSR_PTP_RX_STATUS_PENDING_OFFSET) & 1u) &&
	       !is_event(INFO_TYPE(ptp_rx_info_read())))
		ptp_rx_pop_write(1);
}

static void tx_timestamps(void)
{
	while ((ptp_tx_status_read() >> CSR_PTP_TX_STATUS_PENDING_OFFSET) & 1u) {
		uint32_t info = ptp_tx_info_read();
		if (is_event(INFO_TYPE(info))) {
			/* A record no unit makes is not used: the port counts the Sync's or Delay_Req's
			 * timestamp as missing (tx_ts_missing). */
			struct ptp_time ts;
			int ok = ptp_hwts_correct(&ts, ptp_tx_seconds_read(), ptp_tx_nanoseconds_read(),
			                          TX_START_LANE(), &tx_corr) == 0;
			ptp_tx_pop_write(1);
			if (ok)
				ptp_port_tx_timestamp(&port, INFO_TYPE(info), (uint16_t)INFO_SEQ(info), &ts);
		} else {
			ptp_tx_pop_write(1);
		}
	}
}

/* Service -------------------------------------------------------------------------------------- */

static const struct ptp_ops ops = {
	.send          = send,
	.clock_read    = clock_read,
	.clock_step    = clock_step,
	.clock_adjfreq = clock_adjfreq,
};

static const char *state_name(unsigned s)
{
	static const char *const names[] = { "?", "INITIALIZING", "FAULTY", "DISABLED", "LISTENING",
		"PRE_MASTER", "MASTER", "PASSIVE", "UNCALIBRATED", "SLAVE" };
	return s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

static const char *servo_name(unsigned s)
{
	return s == PTP_SERVO_LOCKED ? "LOCKED" : s == PTP_SERVO_JUMP ? "JUMP" : "UNLOCKED";
}

void ptpsvc_print_status(void)
{
	static char line[1024];
	ptp_status_format(line, sizeof(line), ptp_port_status(&port));
	console_printf("ptp: %s rx_ts_missing=%lu rx_ts_discarded=%lu hw_rx_overflows=%lu hw_tx_overflows=%lu clock_rejected=%lu port_rx_dropped=%lu console_dropped=%lu\n",
	       line, (unsigned long)cnt.rx_ts_missing, (unsigned long)cnt.rx_ts_discarded,
	       (unsigned long)cnt.hw_rx_overflows, (unsigned long)cnt.hw_tx_overflows,
	       (unsigned long)cnt.clock_rejected, (unsigned long)cnt.port_rx_dropped,
	       (unsigned long)console_dropped());
}

/* Signed decimal of a 64-bit value (the console's printf has no %lld). */
/* Decimal digits by subtracting powers of ten: no division. The CPU has no divider, and the 20
 * software 64-bit divisions this took before made a status line cost about 40,000 cycles, during
 * which control requests waited (bench/ctllatency.py saw them). */
static const char *i64(char buf[21], int64_t v)
{
	static const uint64_t pow10[19] = {
		1000000000000000000ull, 100000000000000000ull, 10000000000000000ull, 1000000000000000ull,
		100000000000000ull, 10000000000000ull, 1000000000000ull, 100000000000ull, 10000000000ull,
		1000000000ull, 100000000ull, 10000000ull, 1000000ull, 100000ull, 10000ull, 1000ull, 100ull, 10ull, 1ull,
	};
	uint64_t a = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
	char *p = buf;
	int started = 0;

	if (v < 0)
		*p++ = '-';
	for (int i = 0; i < 19; i++) {
		char d = '0';
		while (a >= pow10[i]) {
			a -= pow10[i];
			d++;
		}
		if (d != '0' || started || i == 18) {
			*p++ = d;
			started = 1;
		}
	}
	*p = 0;
	return buf;
}

/* The periodic line: what a user watches (and bench/ptp2.py parses). */
static void print_short(const struct ptp_status *st)
{
	char o[21], d[21], f[21];
	int64_t scaled = st->freq_scaled_ppb;
	uint32_t milli = (uint32_t)((((uint64_t)(scaled < 0 ? -scaled : scaled) & 0xffff) * 1000) >> 16);
	console_printf("ptp: %s %s offset=%s delay=%s freq=%s%s.%03u ppb\n", state_name(st->state),
	       servo_name(st->servo_state), i64(o, st->offset_ns), i64(d, st->mean_path_delay_ns),
	       scaled < 0 && scaled > -65536 ? "-" : "", i64(f, scaled / 65536), (unsigned)milli);
}

static void update_synced(const struct ptp_status *st)
{
	/* Our time is the shared PTP time when we follow a master and the servo is locked, or
	 * when we are the master the others follow. */
	int synced = (st->state == PTP_PS_SLAVE && st->servo_state == PTP_SERVO_LOCKED) ||
	             st->state == PTP_PS_MASTER;
	ptp_synced_write(synced);
}

static uint8_t port_mac[6];

/* (Re)start the port with these settings: 0, or -1 if the stack refuses them (the port then
 * goes on as it was). */
static int start_port(const struct ctl_ptp_config *c)
{
	struct ptp_config cfg;
	uint64_t now = uptime_ns();

	ptp_config_default(&cfg, port_mac);
	cfg.role                       = c->role;
	cfg.transport                  = ETHDAQ_PTP_TRANSPORT;
	cfg.domain                     = c->domain;
	cfg.priority1                  = c->priority1;
	cfg.priority2                  = c->priority2;
	cfg.log_sync_interval          = c->log_sync;
	cfg.log_announce_interval      = c->log_announce;
	cfg.log_min_delay_req_interval = c->log_delay_req;
	cfg.seed                       = (uint32_t)port_mac[4] << 8 | port_mac[5];
	/* ptp4l steps first only beyond 20 us, because stepping a software clock costs accuracy.
	 * Our add is exact (one cycle, hardware), while pulling in microseconds with the PI loop
	 * winds up its integral and takes hundreds of sync intervals to settle: step first from
	 * 100 ns on. */
	cfg.servo.first_step_threshold_ns = 100;
	if (ptp_port_init(&port, &cfg, &ops, NULL, now) != 0) {
		printf("ptp: configuration rejected (role %d, transport %d, log intervals %d/%d/%d)\n",
		       c->role, ETHDAQ_PTP_TRANSPORT, c->log_sync, c->log_announce, c->log_delay_req);
		return -1;
	}
	ptp_synced_write(0);
	last_state = port.st.state;
	last_servo = port.st.servo_state;
	next_status_ns = now;
	printf("ptp: %s over %s, domain %u, sync 2^%d s, announce 2^%d s, delay_req 2^%d s, priority %u/%u\n",
	       cfg.role == PTP_ROLE_MASTER_ONLY ? "master" : cfg.role == PTP_ROLE_SLAVE_ONLY ? "slave" : "auto",
	       cfg.transport == PTP_TRANSPORT_L2 ? "Ethernet (0x88F7)" : "UDP/IPv4 (224.0.1.129)",
	       (unsigned)cfg.domain, cfg.log_sync_interval, cfg.log_announce_interval,
	       cfg.log_min_delay_req_interval, (unsigned)cfg.priority1, (unsigned)cfg.priority2);
	return 0;
}

void ptpsvc_default_config(struct ctl_ptp_config *c)
{
	static const uint8_t any_mac[6];
	struct ptp_config stack;

	ptp_config_default(&stack, any_mac);  /* For the stack's (ptp4l's) default priorities. */
	c->role          = ETHDAQ_PTP_ROLE;
	c->transport     = ETHDAQ_PTP_TRANSPORT;
	c->domain        = ETHDAQ_PTP_DOMAIN;
	c->log_sync      = ETHDAQ_PTP_LOG_SYNC;
	c->log_announce  = ETHDAQ_PTP_LOG_ANNOUNCE;
	c->log_delay_req = ETHDAQ_PTP_LOG_DELAY_REQ;
	c->priority1     = stack.priority1;
	c->priority2     = stack.priority2;
}

void ptpsvc_init(const uint8_t mac[6], const struct ctl_ptp_config *c)
{
	memcpy(port_mac, mac, sizeof(port_mac));
	/* PPS high for the first 100 ms of each second: long enough for any instrument input. */
	ptp_pps_width_write(100000000);
	/* A free-running clock starts at 0 s (1970); a master that is not told the time by anyone
	 * keeps it so, and says so in its Announce (timeSource internal oscillator). */
	start_port(c);
}

void ptpsvc_set_mac(const uint8_t mac[6], const struct ctl_ptp_config *c)
{
	memcpy(port_mac, mac, sizeof(port_mac));
	start_port(c);
}

int ptpsvc_configure(const struct ctl_ptp_config *c)
{
	/* The clock keeps its time and rate; the port starts afresh (state, master, counters). */
	return start_port(c) == 0 ? 0 : CTL_ERR_BAD_VALUE;
}

static void handle(enum ptp_channel channel, const uint8_t *msg, size_t len)
{
	struct ptp_time ts;
	if (channel == PTP_CHANNEL_EVENT && rx_timestamp(msg, len, &ts))
		ptp_port_receive(&port, msg, len, &ts);
	else
		ptp_port_receive(&port, msg, len, NULL);
	tx_timestamps();
}

void ptpsvc_input(uint16_t local_port, const uint8_t *msg, size_t len)
{
	if (local_port == PTP_EVENT_PORT)
		handle(PTP_CHANNEL_EVENT, msg, len);
	else if (local_port == PTP_GENERAL_PORT)
		handle(PTP_CHANNEL_GENERAL, msg, len);
}

void ptpsvc_poll(void)
{
	const struct ptp_status *st;
	uint64_t now;

	tx_timestamps();
	rx_drop_general();
#ifdef ETHDAQ_PTP_L2
	{
		enum ptp_channel channel;
		size_t len;
		while ((len = receive(&channel)) != 0)
			handle(channel, msg_buf, len);
	}
#endif
	now = uptime_ns();
	poll_now_ns = now;
	ptp_port_tick(&port, now);
	tx_timestamps();

	st = ptp_port_status(&port);
	update_synced(st);
	if (st->state != last_state || st->servo_state != last_servo) {
		/* A change of the port's state, or of the servo's in the same port state: what changed,
		 * then every counter as it stands. */
		if (st->state != last_state)
			console_printf("ptp: state %s -> %s\n", state_name(last_state), state_name(st->state));
		else
			console_printf("ptp: %s servo %s -> %s\n", state_name(st->state), servo_name(last_servo),
				       servo_name(st->servo_state));
		last_state = st->state;
		last_servo = st->servo_state;
		ptpsvc_print_status();
	} else if ((int64_t)(now - next_status_ns) >= 0) {
		print_short(st);
		if (ETHDAQ_PTP_STATUS_FULL)
			ptpsvc_print_status();  /* Built with --ptp-status-full: every counter, each time. */
	}
	if ((int64_t)(now - next_status_ns) >= 0) {
		/* 2^ETHDAQ_PTP_STATUS_LOG s, -10..6 */
		next_status_ns = now + (ETHDAQ_PTP_STATUS_LOG >= 0 ?
			(uint64_t)NSEC_PER_SEC << ETHDAQ_PTP_STATUS_LOG :
			(uint64_t)NSEC_PER_SEC >> -(ETHDAQ_PTP_STATUS_LOG));
	}
#ifdef ETHDAQ_PTP_L2
	cnt.port_rx_dropped = ptp_l2_rx_dropped_read();
#else
	cnt.port_rx_dropped = event_count(EVENT_CTLPORT_RX_DROPPED);
	cnt.rx_truncated = port_stats.rx_truncated;
	cnt.rx_too_long  = port_stats.rx_too_long;
	cnt.tx_too_long  = port_stats.tx_too_long;
	cnt.tx_timeout   = port_stats.tx_timeout;
#endif
	cnt.hw_rx_overflows = event_count(EVENT_PTP_RX_OVERFLOWS);
	cnt.hw_tx_overflows = event_count(EVENT_PTP_TX_OVERFLOWS);
}

const struct ptp_status *ptpsvc_status(void)
{
	return ptp_port_status(&port);
}

const struct ptpsvc_counters *ptpsvc_counters(void)
{
	return &cnt;
}

uint64_t ptpsvc_uptime_ns(void)
{
	return poll_now_ns;
}

void ptpsvc_now(uint64_t *sec, uint32_t *ns)
{
	struct ptp_time t;
	clock_read(NULL, &t);
	*sec = t.sec;
	*ns  = t.nsec;
}

uint64_t ptpsvc_uptime_ms(void)
{
	return uptime_ns() / 1000000u;
}

int ptpsvc_ctl_status(struct ctl_ptp_status *out)
{
	const struct ptp_status *st = ptp_port_status(&port);

	out->state = st->state;
	out->servo_state = st->servo_state;
	out->role = st->role;
	out->transport = st->transport;
	out->offset_ns = st->offset_ns;
	out->mean_path_delay_ns = st->mean_path_delay_ns;
	out->freq_scaled_ppb = st->freq_scaled_ppb;
	memcpy(out->clock_identity, st->port_identity.clock_identity, 8);
	memcpy(out->parent_identity, st->parent.clock_identity, 8);
	out->parent_port = st->parent.port_number;
	memcpy(out->gm_identity, st->gm_identity, 8);
	out->gm_priority1 = st->gm_priority1;
	out->gm_priority2 = st->gm_priority2;
	out->steps_removed = st->steps_removed;
	out->utc_offset = st->utc_offset;
	out->time_flags = st->time_flags;
	out->steps = st->cnt.steps;
	out->announce_timeouts = st->cnt.announce_timeouts;
	out->servo_samples = st->cnt.servo_samples;
	out->delay_resp_missing = st->cnt.delay_resp_missing;
	out->tx_ts_missing = st->cnt.tx_ts_missing;
	out->faults = st->cnt.faults;
	out->rx_ts_missing = cnt.rx_ts_missing;
	out->hw_rx_overflows = cnt.hw_rx_overflows;
	out->hw_tx_overflows = cnt.hw_tx_overflows;
	return 0;
}

#else

void ptpsvc_default_config(struct ctl_ptp_config *c) { memset(c, 0, sizeof(*c)); }
void ptpsvc_init(const uint8_t mac[6], const struct ctl_ptp_config *c) { (void)mac; (void)c; }
void ptpsvc_set_mac(const uint8_t mac[6], const struct ctl_ptp_config *c) { (void)mac; (void)c; }
int ptpsvc_configure(const struct ctl_ptp_config *c) { (void)c; return CTL_ERR_UNSUPPORTED; }
void ptpsvc_poll(void) {}
void ptpsvc_input(uint16_t local_port, const uint8_t *msg, size_t len) { (void)local_port; (void)msg; (void)len; }
void ptpsvc_print_status(void) {}
const struct ptp_status *ptpsvc_status(void) { return 0; }
const struct ptpsvc_counters *ptpsvc_counters(void) { static struct ptpsvc_counters c; return &c; }
uint64_t ptpsvc_uptime_ms(void) { return 0; }  /* No clock: control leases do not lapse. */
uint64_t ptpsvc_uptime_ns(void) { return 0; }
void ptpsvc_now(uint64_t *sec, uint32_t *ns) { *sec = 0; *ns = 0; }
int ptpsvc_ctl_status(struct ctl_ptp_status *out) { (void)out; return -1; }

#endif
