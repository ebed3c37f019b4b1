/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * IEEE 1588-2008 (PTPv2) messages, clause 13: the 34-byte common header and the bodies of
 * Sync, Delay_Req, Follow_Up, Delay_Resp and Announce. Parsing and building only: bytes in,
 * host-order structs out and back, with every read and write bounds-checked. No transport
 * headers here: the platform adds UDP/IPv4 or Ethernet around these bytes.
 */
#ifndef ETHDAQ_PTP_MSG_H
#define ETHDAQ_PTP_MSG_H

#include <stddef.h>
#include <stdint.h>

#define PTP_VERSION          2     /* versionPTP, the low nibble of byte 1 */
#define PTP_HEADER_LEN       34
#define PTP_SYNC_LEN         44    /* Sync, Delay_Req, Follow_Up: header + one timestamp */
#define PTP_DELAY_RESP_LEN   54    /* + requestingPortIdentity */
#define PTP_PDELAY_LEN       54    /* Pdelay_Req, Pdelay_Resp, Pdelay_Resp_Follow_Up */
#define PTP_ANNOUNCE_LEN     64
#define PTP_SIGNALING_LEN    44    /* header + targetPortIdentity */
#define PTP_MANAGEMENT_LEN   48
#define PTP_MAX_BUILD_LEN    PTP_ANNOUNCE_LEN  /* The longest message the stack sends. */

enum ptp_msg_type {
	PTP_MSG_SYNC          = 0x0,
	PTP_MSG_DELAY_REQ     = 0x1,
	PTP_MSG_PDELAY_REQ    = 0x2,
	PTP_MSG_PDELAY_RESP   = 0x3,
	PTP_MSG_FOLLOW_UP     = 0x8,
	PTP_MSG_DELAY_RESP    = 0x9,
	PTP_MSG_PDELAY_RESP_FOLLOW_UP = 0xA,
	PTP_MSG_ANNOUNCE      = 0xB,
	PTP_MSG_SIGNALING     = 0xC,
	PTP_MSG_MANAGEMENT    = 0xD,
};

/* flagField as one big-endian 16-bit value: octet 0 is the high byte (Table 20). */
#define PTP_FLAG_ALTERNATE_MASTER  0x0100
#define PTP_FLAG_TWO_STEP          0x0200
#define PTP_FLAG_UNICAST           0x0400
#define PTP_FLAG_LEAP61            0x0001
#define PTP_FLAG_LEAP59            0x0002
#define PTP_FLAG_UTC_OFFSET_VALID  0x0004
#define PTP_FLAG_PTP_TIMESCALE     0x0008
#define PTP_FLAG_TIME_TRACEABLE    0x0010
#define PTP_FLAG_FREQ_TRACEABLE    0x0020

#define PTP_LOG_INTERVAL_UNSPECIFIED 0x7F  /* logMessageInterval of Delay_Req (Table 24) */

/* A PTP timestamp: 48-bit seconds and nanoseconds (0..999999999) of the PTP timescale. */
struct ptp_time {
	uint64_t sec;
	uint32_t nsec;
};

struct ptp_port_identity {
	uint8_t  clock_identity[8];
	uint16_t port_number;
};

struct ptp_clock_quality {
	uint8_t  clock_class;
	uint8_t  clock_accuracy;
	uint16_t offset_scaled_log_variance;
};

struct ptp_header {
	uint8_t  transport_specific;   /* high nibble of byte 0 */
	uint8_t  type;                 /* enum ptp_msg_type */
	uint8_t  version;              /* versionPTP (low nibble of byte 1); the high nibble is ignored */
	uint16_t length;               /* messageLength */
	uint8_t  domain;
	uint16_t flags;                /* PTP_FLAG_* */
	int64_t  correction;           /* correctionField, scaled ns (2^-16 ns) */
	struct ptp_port_identity source;
	uint16_t sequence_id;
	uint8_t  control;              /* controlField: set by the builder from the type */
	int8_t   log_interval;         /* logMessageInterval */
};

struct ptp_announce {
	int16_t  utc_offset;           /* currentUtcOffset */
	uint8_t  gm_priority1;
	struct ptp_clock_quality gm_quality;
	uint8_t  gm_priority2;
	uint8_t  gm_identity[8];
	uint16_t steps_removed;
	uint8_t  time_source;
};

/* One parsed (or to be built) message. Which body fields are meaningful depends on hdr.type:
 * ts is originTimestamp (Sync, Delay_Req, Announce), preciseOriginTimestamp (Follow_Up) or
 * receiveTimestamp (Delay_Resp); requesting is Delay_Resp's requestingPortIdentity. */
struct ptp_msg {
	struct ptp_header   hdr;
	struct ptp_time     ts;
	struct ptp_port_identity requesting;
	struct ptp_announce announce;
};

/* Why a received message was not used, counted under these names (struct ptp_counters.drop).
 * The first seven are the header checks, applied in this order (as linuxptp does). */
enum ptp_drop {
	PTP_DROP_SHORT,        /* shorter than the common header */
	PTP_DROP_VERSION,      /* versionPTP != 2 */
	PTP_DROP_TYPE,         /* reserved messageType */
	PTP_DROP_TYPE_LENGTH,  /* datagram shorter than its type's body */
	PTP_DROP_LENGTH,       /* messageLength field > datagram, or < its type's length */
	PTP_DROP_DOMAIN,       /* domainNumber is not ours */
	PTP_DROP_OWN,          /* sent by our own clock (looped back) */
	PTP_DROP_UNSUPPORTED,  /* Pdelay_*, Signaling, Management: valid, not handled */
	PTP_DROP_NO_TIMESTAMP, /* event message received without a hardware timestamp */
	PTP_DROP_STATE,        /* not expected in the port's state or role */
	PTP_DROP_NOT_PARENT,   /* Sync/Follow_Up/Delay_Resp from a port that is not our master */
	PTP_DROP_NOT_OURS,     /* Delay_Resp to another requester (normal with multicast) */
	PTP_DROP_SEQUENCE,     /* Follow_Up/Delay_Resp matching no pending Sync/Delay_Req */
	PTP_DROP_ANNOUNCE,     /* Announce unusable: stepsRemoved >= 255, or a duplicate */
	PTP_DROP_COUNT
};

const char *ptp_drop_name(unsigned reason);
const char *ptp_msg_type_name(unsigned type);

/* Minimum length of a message of this type, 0 for a reserved type. */
size_t ptp_msg_min_len(unsigned type);

/*
 * Parse len bytes. Returns -1 when the message passed the header checks (the caller then checks
 * domain and origin), or the enum ptp_drop reason of the first failing check. Trailing bytes
 * (TLVs, Ethernet padding) beyond messageLength are ignored.
 */
int ptp_msg_parse(const uint8_t *buf, size_t len, struct ptp_msg *m);

/*
 * Build m (a Sync, Delay_Req, Follow_Up, Delay_Resp or Announce) into buf. messageLength,
 * versionPTP and controlField come from the type; reserved fields are zero. Returns the length,
 * or 0 for another type or when cap is too small.
 */
size_t ptp_msg_build(uint8_t *buf, size_t cap, const struct ptp_msg *m);

/* a - b in ns, saturated at +-PTP_NS_SATURATE (far apart timestamps only ever cause a step). */
#define PTP_NS_SATURATE 4000000000000000000LL
int64_t ptp_time_diff_ns(const struct ptp_time *a, const struct ptp_time *b);

/* v limited to -limit..limit (limit >= 0). Out of line on purpose: a 64-bit compare-and-select
 * is ~40 bytes of rv32i code at every inlined use. */
int64_t ptp_clamp64(int64_t v, int64_t limit);

/* n / d (d > 0), truncated toward zero as in C; *rem (if not NULL) gets n - quotient * d.
 * Shift-subtract: the target has no divider, and libgcc's 64-bit division routines take
 * 1.2-1.5 KiB each; the stack divides a few times per second at most. */
int64_t ptp_div64(int64_t n, int64_t d, int64_t *rem);

int ptp_port_identity_equal(const struct ptp_port_identity *a, const struct ptp_port_identity *b);

/* Bytes helpers shared by the stack (no libc: the firmware is built with -fno-builtin). */
void ptp_copy(void *dst, const void *src, size_t n);
int  ptp_compare(const void *a, const void *b, size_t n);

#endif
