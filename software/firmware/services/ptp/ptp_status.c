/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * The status as one line of key=value pairs, for the console (and for tests, which parse it).
 * Own formatting instead of printf: 64-bit values and no dependency on how libc was configured.
 */
#include <stddef.h>

#include "ptp_port.h"

struct out {
	char  *buf;
	size_t cap, len;
};

static void put_char(struct out *o, char c)
{
	if (o->cap && o->len < o->cap - 1)
		o->buf[o->len++] = c;
}

static void put_str(struct out *o, const char *s)
{
	while (*s)
		put_char(o, *s++);
}

/* Decimal by subtracting powers of ten: no 64-bit division on the target. */
static void put_u64(struct out *o, uint64_t v)
{
	uint64_t power[20];
	unsigned n = 0;
	char digit;

	power[0] = 1;
	while (n < 19 && v >= power[n] * 10) {
		power[n + 1] = power[n] * 10;
		n++;
	}
	for (;;) {
		for (digit = '0'; v >= power[n]; digit++)
			v -= power[n];
		put_char(o, digit);
		if (n-- == 0)
			break;
	}
}

static void put_i64(struct out *o, int64_t v)
{
	if (v < 0) {
		put_char(o, '-');
		put_u64(o, (uint64_t)0 - (uint64_t)v);
	} else {
		put_u64(o, (uint64_t)v);
	}
}

static void put_hex(struct out *o, const uint8_t *b, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	while (n--) {
		put_char(o, hex[*b >> 4]);
		put_char(o, hex[*b++ & 15]);
	}
}

/* " key=" */
static void key(struct out *o, const char *prefix, const char *name)
{
	if (o->len)
		put_char(o, ' ');
	put_str(o, prefix);
	put_str(o, name);
	put_char(o, '=');
}

/* Scaled ppb as ppb with three decimals. */
static void put_ppb(struct out *o, int64_t scaled)
{
	uint64_t mag = scaled < 0 ? (uint64_t)0 - (uint64_t)scaled : (uint64_t)scaled;
	uint64_t whole = mag >> 16;
	uint32_t milli = (uint32_t)(((mag & 0xffff) * 1000 + 32768) >> 16);
	if (milli == 1000) {
		whole++;
		milli = 0;
	}
	if (scaled < 0)
		put_char(o, '-');
	put_u64(o, whole);
	put_char(o, '.');
	put_char(o, (char)('0' + milli / 100));
	put_char(o, (char)('0' + milli / 10 % 10));
	put_char(o, (char)('0' + milli % 10));
}

/* The line is driven by a table: on rv32i one row costs far less code than one call site. */
enum kind { K_STATE, K_SERVO, K_ROLE, K_TRANSPORT, K_I64, K_PPB, K_PORT, K_CLOCK, K_U8, K_U16,
            K_I16, K_U32 };

#define FIELD(name, member, kind) { name, offsetof(struct ptp_status, member), kind }
static const struct {
	const char *name;
	uint16_t    offset;
	uint8_t     kind;
} fields[] = {
	FIELD("state", state, K_STATE),
	FIELD("servo", servo_state, K_SERVO),
	FIELD("offset", offset_ns, K_I64),
	FIELD("delay", mean_path_delay_ns, K_I64),
	FIELD("freq_ppb", freq_scaled_ppb, K_PPB),
	FIELD("port", port_identity, K_PORT),
	FIELD("parent", parent, K_PORT),
	FIELD("gm", gm_identity, K_CLOCK),
	FIELD("gm_priority1", gm_priority1, K_U8),
	FIELD("gm_class", gm_quality.clock_class, K_U8),
	FIELD("steps_removed", steps_removed, K_U16),
	FIELD("utc_offset", utc_offset, K_I16),
	FIELD("role", role, K_ROLE),
	FIELD("transport", transport, K_TRANSPORT),
}, counters[] = {
	FIELD("tx_errors", cnt.tx_errors, K_U32),
	FIELD("tx_ts_missing", cnt.tx_ts_missing, K_U32),
	FIELD("tx_ts_unmatched", cnt.tx_ts_unmatched, K_U32),
	FIELD("delay_resp_missing", cnt.delay_resp_missing, K_U32),
	FIELD("delay_rejected", cnt.delay_rejected, K_U32),
	FIELD("announce_timeouts", cnt.announce_timeouts, K_U32),
	FIELD("steps", cnt.steps, K_U32),
	FIELD("faults", cnt.faults, K_U32),
	FIELD("servo_samples", cnt.servo_samples, K_U32),
};

static void put_value(struct out *o, const void *at, unsigned kind)
{
	static const char *const roles[] = { "auto", "master", "slave" };
	const struct ptp_port_identity *id = at;
	uint8_t u8 = *(const uint8_t *)at;

	switch (kind) {
	case K_STATE:     put_str(o, ptp_port_state_name(u8)); break;
	case K_SERVO:     put_str(o, ptp_servo_state_name(u8)); break;
	case K_ROLE:      put_str(o, u8 < 3 ? roles[u8] : "?"); break;
	case K_TRANSPORT: put_str(o, u8 == PTP_TRANSPORT_L2 ? "l2" : "udp4"); break;
	case K_I64:       put_i64(o, *(const int64_t *)at); break;
	case K_PPB:       put_ppb(o, *(const int64_t *)at); break;
	case K_PORT:
		put_hex(o, id->clock_identity, 8);
		put_char(o, '-');
		put_u64(o, id->port_number);
		break;
	case K_CLOCK:     put_hex(o, at, 8); break;
	case K_U8:        put_u64(o, u8); break;
	case K_U16:       put_u64(o, *(const uint16_t *)at); break;
	case K_I16:       put_i64(o, *(const int16_t *)at); break;
	default:          put_u64(o, *(const uint32_t *)at); break;
	}
}

size_t ptp_status_format(char *buf, size_t len, const struct ptp_status *st)
{
	static const uint8_t handled[] = { PTP_MSG_SYNC, PTP_MSG_FOLLOW_UP, PTP_MSG_DELAY_REQ,
	                                   PTP_MSG_DELAY_RESP, PTP_MSG_ANNOUNCE };
	const struct ptp_counters *c = &st->cnt;
	struct out o = { buf, len, 0 };
	uint32_t rx_other = 0;
	unsigned i;

	for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		key(&o, "", fields[i].name);
		put_value(&o, (const uint8_t *)st + fields[i].offset, fields[i].kind);
	}
	for (i = 0; i < 16; i++)
		rx_other += c->rx[i];
	for (i = 0; i < sizeof(handled); i++) {
		key(&o, "rx_", ptp_msg_type_name(handled[i]));
		put_u64(&o, c->rx[handled[i]]);
		rx_other -= c->rx[handled[i]];
	}
	key(&o, "", "rx_other");
	put_u64(&o, rx_other);
	for (i = 0; i < sizeof(handled); i++) {
		key(&o, "tx_", ptp_msg_type_name(handled[i]));
		put_u64(&o, c->tx[handled[i]]);
	}
	for (i = 0; i < PTP_DROP_COUNT; i++) {
		key(&o, "drop_", ptp_drop_name(i));
		put_u64(&o, c->drop[i]);
	}
	for (i = 0; i < sizeof(counters) / sizeof(counters[0]); i++) {
		key(&o, "", counters[i].name);
		put_value(&o, (const uint8_t *)st + counters[i].offset, counters[i].kind);
	}
	if (len)
		buf[o.len] = 0;
	return o.len;
}
