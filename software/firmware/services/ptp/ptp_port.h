/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * A PTPv2 ordinary clock with one port: end-to-end delay mechanism, two-step master, slave that
 * accepts one- and two-step Sync. No hardware access, no allocation, no globals: everything
 * lives in the struct ptp_port the caller owns, and the board is reached through struct ptp_ops.
 *
 * The caller (see docs/ptp-firmware.md):
 *   ptp_port_init()         once;
 *   ptp_port_tick()         from the main loop, as often as convenient (timer resolution);
 *   ptp_port_receive()      for every PTP message received, with its hardware RX timestamp;
 *   ptp_port_tx_timestamp() whenever the hardware reports the TX timestamp of an event message.
 * None of these may be called from within an ops callback.
 */
#ifndef ETHDAQ_PTP_PORT_H
#define ETHDAQ_PTP_PORT_H

#include <stddef.h>
#include <stdint.h>

#include "ptp_bmc.h"
#include "ptp_fsm.h"
#include "ptp_msg.h"
#include "ptp_servo.h"

#define PTP_MAX_FOREIGN      4    /* foreign master records */
#define PTP_DELAY_FILTER_MAX 16   /* moving-average length limit */

/* Event messages (Sync, Delay_Req) are timestamped by the hardware: UDP port 319;
 * general messages (Follow_Up, Delay_Resp, Announce): UDP port 320. Over Ethernet both go to
 * 01:1B:19:00:00:00 with EtherType 0x88F7. */
enum ptp_channel {
	PTP_CHANNEL_EVENT,
	PTP_CHANNEL_GENERAL,
};

enum ptp_transport {
	PTP_TRANSPORT_UDP_IPV4,   /* 224.0.1.129, ports 319/320 */
	PTP_TRANSPORT_L2,         /* IEEE 802.3, EtherType 0x88F7 */
};

enum ptp_role {
	PTP_ROLE_AUTO,            /* best master clock algorithm decides */
	PTP_ROLE_MASTER_ONLY,     /* always master, ignores other masters' Announces */
	PTP_ROLE_SLAVE_ONLY,      /* never master (clockClass 255) */
};

struct ptp_ops {
	/* Send one PTP message (len bytes from the common header on) on the given channel; the
	 * platform adds the transport headers. Return 0 when queued. For an event message, a 0
	 * promises a later ptp_port_tx_timestamp() (if that never comes it is counted). */
	int  (*send)(void *ctx, enum ptp_channel channel, const uint8_t *msg, size_t len);
	/* Current PTP time, for the (informative) originTimestamp fields. May be NULL: zeros. */
	void (*clock_read)(void *ctx, struct ptp_time *now);
	/* Add offset_ns (signed) to the PTP clock, at once. Nonzero return: fault. */
	int  (*clock_step)(void *ctx, int64_t offset_ns);
	/* Run the PTP clock at nominal * (1 + scaled_ppb / 2^16 * 1e-9), replacing the previous
	 * adjustment (absolute, not cumulative). |scaled_ppb| <= max_freq_ppb * 2^16.
	 * Nonzero return: fault. */
	int  (*clock_adjfreq)(void *ctx, int64_t scaled_ppb);
};

struct ptp_config {
	uint8_t  clock_identity[8];          /* EUI-64, e.g. ptp_clock_identity_from_mac() */
	uint16_t port_number;                /* 1 for an ordinary clock */
	uint8_t  domain;                     /* domainNumber, ptp4l's default 0 */
	uint8_t  role;                       /* enum ptp_role */
	uint8_t  transport;                  /* enum ptp_transport: reported, the platform uses it */
	uint8_t  priority1;                  /* 128 */
	uint8_t  priority2;                  /* 128 */
	struct ptp_clock_quality quality;    /* class 248 (255 slave-only), accuracy 0xFE, 0xFFFF */
	uint8_t  time_source;                /* 0xA0 internal oscillator */
	int16_t  utc_offset;                 /* currentUtcOffset as master, 37 s */
	uint16_t time_flags;                 /* Announce flags as master: PTP_FLAG_PTP_TIMESCALE... */
	int8_t   log_announce_interval;      /* log2 s, -10..6; ptp4l: 1 */
	int8_t   log_sync_interval;          /* log2 s, -10..6; ptp4l: 0 */
	int8_t   log_min_delay_req_interval; /* log2 s, -10..6; ptp4l: 0 (a slave adopts the master's) */
	uint8_t  announce_receipt_timeout;   /* announce intervals, >= 2; ptp4l: 3 */
	int8_t   log_fault_reset_interval;   /* log2 s in FAULTY before retrying, -10..6 */
	uint8_t  delay_filter_len;           /* mean path delay filter length, 1..16 */
	uint32_t seed;                       /* PRNG for timer randomisation (0: a fixed one) */
	struct ptp_servo_config servo;
};

/* Sensible defaults (those of ptp4l where it has one); role AUTO, UDP/IPv4, identity from mac. */
void ptp_config_default(struct ptp_config *cfg, const uint8_t mac[6]);
/* EUI-48 to EUI-64 by inserting FF FE, as linuxptp does. */
void ptp_clock_identity_from_mac(uint8_t identity[8], const uint8_t mac[6]);

struct ptp_counters {
	uint32_t rx[16];              /* messages past the header checks, by messageType */
	uint32_t tx[16];              /* messages sent, by messageType */
	uint32_t drop[PTP_DROP_COUNT];/* received and not used, by reason */
	uint32_t tx_errors;           /* send() refused a message */
	uint32_t tx_ts_missing;       /* event message whose TX timestamp never came (no Follow_Up
	                                 sent / no delay sample) */
	uint32_t tx_ts_unmatched;     /* TX timestamp matching nothing pending (late or unknown) */
	uint32_t delay_resp_missing;  /* Delay_Req that got no Delay_Resp before the next one */
	uint32_t delay_rejected;      /* implausible delay sample (|2 x delay| > 1 s) */
	uint32_t announce_timeouts;
	uint32_t steps;               /* clock steps */
	uint32_t faults;              /* clock_step/clock_adjfreq failed */
	uint32_t servo_samples;       /* offsets fed to the servo */
};

struct ptp_status {
	uint8_t  state;               /* enum ptp_port_state */
	uint8_t  servo_state;         /* enum ptp_servo_state */
	uint8_t  role;
	uint8_t  transport;
	int64_t  offset_ns;           /* last offset from master: slave minus master, ns */
	int64_t  mean_path_delay_ns;  /* filtered */
	int64_t  freq_scaled_ppb;     /* adjustment in effect, ppb * 2^16 */
	struct ptp_port_identity port_identity;
	struct ptp_port_identity parent;  /* parentPortIdentity: our master, or us as master */
	uint8_t  gm_identity[8];
	struct ptp_clock_quality gm_quality;
	uint8_t  gm_priority1;
	uint8_t  gm_priority2;
	uint16_t steps_removed;       /* to the grandmaster, 0 when we are it */
	int16_t  utc_offset;          /* timePropertiesDS, from the master's Announce */
	uint16_t time_flags;
	struct ptp_counters cnt;
};

/* --- internals (the caller owns the memory; it does not touch the fields) --------------------- */

struct ptp_foreign {
	struct ptp_dataset ds;
	uint32_t rx_prev, rx_last;    /* when the last two Announces came (timer units) */
	int16_t  utc_offset;
	uint16_t time_flags;
	uint16_t seq;
	uint8_t  count;               /* Announces seen, up to 2; 0: free slot */
	int8_t   log_interval;        /* its logAnnounceInterval */
};

struct ptp_delay_filter {
	int64_t sample[PTP_DELAY_FILTER_MAX];  /* scaled ns */
	uint8_t len, count, next;
};

enum ptp_timer {
	PTP_TIMER_ANNOUNCE_TX,
	PTP_TIMER_SYNC_TX,
	PTP_TIMER_DELAY_REQ,
	PTP_TIMER_ANNOUNCE_RX,
	PTP_TIMER_FAULT,
	PTP_TIMER_COUNT
};

struct ptp_port {
	struct ptp_config cfg;
	const struct ptp_ops *ops;
	void    *ctx;
	struct ptp_status st;
	struct ptp_servo servo;
	struct ptp_delay_filter delay;
	struct ptp_foreign foreign[PTP_MAX_FOREIGN];
	/* Timers count 1024 ns units in 32 bits (wrapping after 73 min, compared wrap-safe): plenty
	 * for intervals of 2^-10..2^6 s, and cheap on a CPU without 64-bit arithmetic. */
	uint32_t now;                 /* last tick */
	uint32_t deadline[PTP_TIMER_COUNT];
	uint8_t  armed;               /* bit i: deadline[i] is armed */
	uint32_t rng;
	uint16_t seq_announce, seq_sync, seq_delay_req;
	int8_t   log_delay_req;       /* Delay_Req interval in use */
	/* master: the Sync waiting for its TX timestamp */
	uint8_t  sync_pending;
	uint16_t sync_pending_seq;
	/* slave: the last Sync from the parent */
	uint8_t  sync_state;
	int8_t   sync_log;
	uint16_t sync_seq;
	struct ptp_time t1, t2;
	int64_t  sync_corr;           /* Sync + Follow_Up correction, scaled ns */
	/* slave: the Delay_Req in flight */
	uint8_t  dreq_flags;
	uint16_t dreq_seq;
	struct ptp_time t3, t4;
	int64_t  dresp_corr;
	uint8_t  step_pending;        /* servo said JUMP: step once a fresh delay is known */
	int64_t  est_delay;           /* delay held constant during a frequency estimate */
};

/* Returns 0, or -1 for an invalid configuration or missing ops. now_ns: as for ptp_port_tick. */
int  ptp_port_init(struct ptp_port *p, const struct ptp_config *cfg, const struct ptp_ops *ops,
                   void *ctx, uint64_t now_ns);

/* now_ns: a monotonic nanosecond count that is never stepped or slewed by the stack (e.g. the
 * CPU's uptime cycle counter scaled to ns; NOT the PTP clock, which the stack steps). */
void ptp_port_tick(struct ptp_port *p, uint64_t now_ns);

/* One received PTP message (from the common header on; trailing padding is fine). rx_ts: the
 * hardware receive timestamp (PTP clock), required for Sync and Delay_Req, may be NULL otherwise. */
void ptp_port_receive(struct ptp_port *p, const uint8_t *msg, size_t len,
                      const struct ptp_time *rx_ts);

/* The hardware's transmit timestamp of the event message (msg_type, sequence_id) we sent. */
void ptp_port_tx_timestamp(struct ptp_port *p, unsigned msg_type, uint16_t sequence_id,
                           const struct ptp_time *tx_ts);

const struct ptp_status *ptp_port_status(const struct ptp_port *p);

/* One line of "key=value" pairs for the console; always NUL-terminated when len > 0.
 * Returns the number of characters written (without the NUL). */
size_t ptp_status_format(char *buf, size_t len, const struct ptp_status *st);

#endif
