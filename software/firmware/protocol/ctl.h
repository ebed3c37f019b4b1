/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Control protocol handler: pure functions over byte buffers, no hardware access, so the same
 * code is built for the RISC-V firmware, for host tests and for the fuzzer.
 */
#ifndef ETHDAQ_CTL_H
#define ETHDAQ_CTL_H

#include <stddef.h>
#include <stdint.h>

#include <generated/ctl_protocol.h>

struct ctl_identity {
	uint8_t     mac[6];
	uint32_t    ip;
	uint16_t    ctl_port;
	uint32_t    sys_clk_hz;
	uint8_t     eth_dw;
	uint8_t     nchannels;    /* 0: built without the streamer. */
	uint8_t     sample_bits;
	uint16_t    max_payload;
	uint32_t    capabilities; /* CTL_CAP_* */
	const char *board;
	const char *build_id;
	const char *ident;
	/* nchannels worst-case samples/s its front-end declares, channel 0 first (0: undeclared);
	 * NULL: none declared. Sent after the strings (CTL_IDENTIFY_RATE_SIZE bytes each). */
	const uint32_t *max_rates;
	/* nchannels event layouts, channel 0 first: 0 a channel of samples, else a channel of events
	 * whose id has this many bits (docs/frontends.md); NULL: every channel carries samples. Sent
	 * after the rates (CTL_IDENTIFY_EVENT_SIZE bytes each), only when not NULL. */
	const uint8_t  *event_id_bits;
	/* This boot (gateware/watchdog.py; constant until the next reset). */
	uint16_t    boots;          /* Resets since power-on. */
	uint8_t     reset_cause;    /* Why the last one happened: 0 power-on, 1 watchdog, 2 reboot. */
	uint16_t    watchdog_resets;
};

/* Every request that does not produce its normal response is counted under one name. */
struct ctl_counters {
	uint32_t requests;      /* Requests answered normally. */
	uint32_t short_drop;    /* Shorter than a header: dropped without answer. */
	uint32_t magic_drop;    /* Wrong magic (not our protocol): dropped without answer. */
	uint32_t response_drop; /* A response sent to us (bit 7 set): dropped to avoid loops. */
	uint32_t bad_version;   /* Answered with CTL_ERR_BAD_VERSION. */
	uint32_t bad_type;      /* Answered with CTL_ERR_BAD_TYPE. */
	uint32_t bad_length;    /* Answered with CTL_ERR_BAD_LENGTH. */
	uint32_t refused;       /* Well-formed but refused: CTL_ERR_BAD_VALUE, _BUSY, _UNSUPPORTED. */
	uint32_t no_room;       /* Response did not fit the caller's buffer. */
	uint32_t stale_seq;     /* Answered with CTL_ERR_STALE_SEQ: an old (or reused) seq, not executed. */
	uint32_t replayed;      /* Retransmitted requests answered from the reply cache, not executed. */
	uint32_t not_allowed;   /* State-changing requests from outside the allow-list: CTL_ERR_NOT_ALLOWED. */
	uint32_t not_controller; /* ... from another address than the controller's: CTL_ERR_NOT_CONTROLLER,
	                          * or a CLAIM answered "not granted". */
	uint32_t auth_required; /* State-changing requests without AUTH on a board with a key. */
	uint32_t auth_failed;   /* AUTH with a wrong MAC or an old counter. */
};

/* Who may change the board's state. allow: networks (address & mask == net) whose addresses may
 * claim the board; none: any address. holder: the controller's IPv4, 0 for none. */
struct ctl_net {
	uint32_t net;
	uint32_t mask;
};

struct ctl_access {
	const struct ctl_net *allow;
	size_t   nallow;
	uint32_t holder;
	uint32_t lease_ms;      /* The holder's lease length; renewed by each accepted request. */
	uint64_t expires_ms;
};

/* Retransmission safety: per requester (IP, port), its last request and answer, and the seqs of
 * the CTL_REPLAY_HISTORY requests before it. A client that gets no answer sends the same request
 * with the same seq again; if the board did execute it (the answer was lost), it answers again
 * from here and does not execute it twice. A request with one of the older seqs (a copy delayed
 * in the network), or with the last seq but other bytes, is refused (CTL_ERR_STALE_SEQ). Entries
 * for CTL_REPLAY_SOURCES requesters; a new one replaces the one heard from longest ago. */
struct ctl_replay_entry {
	uint32_t ip;
	uint16_t port;
	uint8_t  used;
	uint8_t  req_len;
	uint32_t seq;           /* Of the last request executed. */
	uint32_t older[CTL_REPLAY_HISTORY];  /* The seqs before it (a ring; 0 = unused slot too). */
	uint8_t  older_next;
	uint8_t  older_count;
	uint32_t last_used;     /* ctl_replay.clock when last heard from. */
	uint16_t rsp_len;       /* 0: the answer was too long to keep (IDENTIFY only: read-only). */
	uint8_t  req[CTL_REPLAY_REQ_MAX];
	uint8_t  rsp[CTL_REPLAY_RSP_MAX];
};

struct ctl_replay {
	struct ctl_replay_entry e[CTL_REPLAY_SOURCES];
	uint32_t clock;
};



struct ctl_stream_cfg {
	uint32_t dst_ip;        /* Never 0 here: 0 in the request means the requester's address. */
	uint16_t dst_port;
	uint16_t payload;       /* UDP payload bytes per datagram, header included. */
	uint8_t  enable;        /* Channel mask. */
	uint8_t  backpressure;  /* Channel mask. */
	uint32_t gap;           /* Idle cycles after each datagram (rate limit). */
	uint8_t  dst_mac[6];    /* All zero: resolve by ARP (broadcast/multicast IPs by rule). */
	uint32_t flush;         /* ns a partial datagram waits after its channel's last sample; 0: never. */
};

struct ctl_emulator_cfg {
	uint8_t  mode;
	uint32_t rate;
	uint32_t seed;
};

/* The PTP port's settings (protocol.py CONFIG). */
struct ctl_ptp_config {
	uint8_t role;           /* 0 auto, 1 master, 2 slave */
	uint8_t transport;      /* 0 UDP/IPv4, 1 L2: fixed at build time */
	uint8_t domain;
	int8_t  log_sync, log_announce, log_delay_req;
	uint8_t priority1, priority2;
};

/* The board's settings, as CONFIG_GET reports them. The caller fills them in at boot from the
 * build; CONFIG_SET changes them, EMULATOR its part. The stream part is what a start uses that
 * does not say otherwise (the host reads it: STREAM_START always carries every field). */
struct ctl_config {
	uint32_t ip;
	uint8_t  mac[6];
	struct ctl_stream_cfg   stream;     /* dst_ip 0: the requester of the start. Not changed by STREAM_START. */
	struct ctl_emulator_cfg emulator;
	struct ctl_ptp_config   ptp;
	uint32_t netmask;       /* The board's subnet (route.h). */
	uint32_t gateway;       /* Default gateway; 0: none, every destination on-link. */
};

/* The link as the PHY reports it over MDIO (STATUS). */
struct ctl_link {
	uint8_t  flags;           /* CTL_LINK_*. */
	uint16_t speed;           /* Mb/s; 0 unknown. */
	uint32_t losses;          /* Times the link went down since boot. */
	uint8_t  phy_address;     /* CTL_NO_PHY: no PHY answered on MDIO. */
	uint32_t phy_id;
};

/* One stream's counters this run (STREAMS). */
struct ctl_stream_counters {
	uint8_t  flags;           /* CTL_STREAM_ENABLED (the handler adds CTL_STREAM_PRESENT). */
	uint64_t datagrams;
	uint64_t bytes;           /* UDP payload, DAQ header included. */
	uint64_t dropped;         /* Samples. */
};

/* LAUNCH (protocol.py): a time-triggered frame. The frame points into the request. */
struct ctl_launch {
	uint8_t  op;              /* CTL_LAUNCH_STOP, _ARM, _QUERY */
	uint8_t  flags;           /* CTL_LAUNCH_RELATIVE */
	uint64_t sec;             /* < 2^48 */
	uint32_t ns, period;      /* < 10^9 */
	uint32_t count;           /* 0: until stopped */
	uint16_t guard;           /* Cycles; 0: the board's default. */
	uint16_t frame_len;       /* CTL_LAUNCH_FRAME_MIN..MAX for ARM (checked by the handler). */
	const uint8_t *frame;     /* Ethernet header and payload, no FCS. */
};

struct ctl_launch_status {
	uint8_t  armed;
	uint16_t guard, lead;     /* eth_tx cycles */
	uint32_t cycle_ps;
	uint32_t sent, missed_past, missed_busy;
	uint64_t first_sec;       /* The first launch of the last ARM, absolute. */
	uint32_t first_ns;
};

/* PROBE (protocol.py): latencies per class, in cycles of cycle_ps. */
struct ctl_probe_class {
	uint32_t count;
	uint64_t sum, sumsq;
	uint16_t min, max;
	uint32_t bins[CTL_PROBE_NBINS];
};

struct ctl_probe_report {
	uint32_t cycle_ps;
	uint8_t  present;         /* Bit i: class i (CTL_PROBE_TX_LAUNCH ...) is measured. */
	uint32_t tx_unpaired, tx_overflows, rx_unpaired, rx_overflows;
	struct ctl_probe_class classes[CTL_PROBE_MAX_CLASSES];
};

/* RULE_SET and RULES (protocol.py): one receive rule, and the whole table with its counters. */
struct ctl_rule {
	uint8_t  index, enable, action, match;   /* match: CTL_RULE_MATCH_* */
	uint16_t ethertype, port;
	uint8_t  proto;
	uint32_t src_ip;
	uint32_t matched, refused;               /* RULES only. */
};

struct ctl_rules_report {
	uint8_t  nrules;
	uint32_t unmatched, gate_error, gate_full, gate_oversize;
	struct ctl_rule rules[CTL_MAX_RULES];
};

struct ctl_status {
	uint8_t  running;
	uint32_t run;
	uint64_t datagrams;
	uint64_t dropped;
	uint32_t port_rx_dropped;
	uint32_t port_tx_dropped;
	uint32_t arp_timeouts;    /* ARP requests for the destination that got no answer. */
	uint8_t  dst_flags;       /* CTL_DST_VALID, CTL_DST_UNREACHABLE. */
	uint8_t  dst_mac[6];      /* Destination MAC in use. */
	uint32_t stale;           /* Datagrams of an earlier run discarded unsent. */
	uint32_t rx_fcs_errors;   /* Received frames with a bad FCS (the MAC's count). */
	uint32_t rx_preamble_errors;
	uint32_t dst_mac_changes; /* The destination MAC replaced by the answer to a refresh. */
	uint32_t arp_refused;     /* ARP frames claiming the destination's IP with another MAC, refused. */
};

/* Everything the handler keeps between requests. Zeroed at start, then access.allow/nallow, the key
 * and config (the build's settings) set. */
struct ctl_state {
	struct ctl_counters cnt;
	struct ctl_replay   replay;
	struct ctl_access   access;
	const uint8_t      *key;         /* Shared key; key_len 0: requests need no AUTH. */
	size_t              key_len;
	uint64_t            auth_counter; /* The last counter accepted. */
	/* Set by an accepted REBOOT: the caller sends the answer, then resets the board. */
	uint8_t             reboot_pending;
	/* Set by an accepted CONFIG_SET of ip, mac, netmask or gateway (config holds them): the caller sends the
	 * answer, then switches the board to them and announces them. */
	uint8_t             net_pending;
	struct ctl_config   config;
};

/* A request as it arrived. now_ms: a monotonic clock in milliseconds (the leases). */
struct ctl_request {
	const uint8_t *data;
	size_t   len;
	uint32_t src_ip;
	uint16_t src_port;
	uint64_t now_ms;
};

/* The firmware's PTP port, as PTP_STATUS carries it (protocol.py PTP_STATUS_RSP). */
struct ctl_ptp_status {
	uint8_t  state, servo_state, role, transport;
	int64_t  offset_ns, mean_path_delay_ns, freq_scaled_ppb;
	uint8_t  clock_identity[8], parent_identity[8];
	uint16_t parent_port;
	uint8_t  gm_identity[8];
	uint8_t  gm_priority1, gm_priority2;
	uint16_t steps_removed;
	int16_t  utc_offset;
	uint16_t time_flags;
	uint32_t steps, announce_timeouts, servo_samples, delay_resp_missing, tx_ts_missing, faults;
	uint32_t rx_ts_missing, hw_rx_overflows, hw_tx_overflows;
};

/* What the handler asks of the board; the firmware drives CSRs, host tests record calls.
 * Functions return 0 or a CTL_ERR_* code. */
struct ctl_ops {
	int  (*stream_start)(const struct ctl_stream_cfg *cfg, uint32_t *run);
	int  (*stream_stop)(uint32_t *run);
	int  (*emulator)(const struct ctl_emulator_cfg *cfg);
	void (*status)(struct ctl_status *st);
	int  (*ptp_status)(struct ctl_ptp_status *st);  /* NULL or non-zero: no PTP in this build. */
	int  (*ptp_config)(const struct ctl_ptp_config *cfg);  /* Restart the PTP port so; NULL: no PTP. */
	void (*link)(struct ctl_link *l);  /* NULL: link unknown (flags 0, no PHY). */
	/* This run's counters of each stream, up to CTL_MAX_STREAMS; returns how many (-1: none). */
	int  (*streams)(struct ctl_stream_counters *s, uint32_t *run);
	/* LAUNCH: do l->op, then report; NULL: no launcher in this build. */
	int  (*launch)(const struct ctl_launch *l, struct ctl_launch_status *s);
	/* PROBE: read; PROBE_CLEAR: empty the probes (r NULL). NULL: no probes in this build. */
	int  (*probe)(int clear, struct ctl_probe_report *r);
	/* RULE_SET (set non-NULL: write it) then RULES: read the table and counters into r (NULL
	 * for RULE_SET). NULL: no classifier in this build. */
	int  (*rules)(const struct ctl_rule *set, struct ctl_rules_report *r);
	/* REG_WRITE (write 1: write `count` words, then read them back) and REG_READ: the user
	 * front-end's registers from byte `offset`. NULL: no front-end in this build. */
	int  (*regs)(int write, uint16_t offset, uint8_t count, uint32_t *words);
	/* RX_STATS: 1 and *value if this build has the receive counter `code` (a CTL_RX_COUNTER_*
	 * code; never asked for the handler's own, CTL_RX_COUNTER_CTL_*), else 0. NULL: the
	 * handler reports only its own. */
	int  (*rx_counter)(uint8_t code, uint64_t *value);
};

/*
 * Handle one request. Writes the response into rsp (capacity rsp_cap). The requester's address is
 * the default stream destination, its key in the reply cache, and what the access rules check.
 * Returns the response length (> 0), 0 when the request is dropped without answer, or
 * -1 when the response does not fit rsp_cap. Every outcome other than a normal answer
 * increments one counter in st->cnt.
 */
int ctl_handle(struct ctl_state *st, const struct ctl_request *rq, uint8_t *rsp, size_t rsp_cap,
               const struct ctl_identity *id, const struct ctl_ops *ops);

/* The length of a request of this type without AUTH (CTL_*_REQ_LENGTH); 0 for an unknown type. */
size_t ctl_request_length(uint8_t type);

#endif
