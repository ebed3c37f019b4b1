/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Parsing order follows linuxptp: minimum length, then magic and version, then message type and
 * its expected length. Byte order is converted here, at the boundary, with explicit shifts.
 */
#include <string.h>

#include "ctl.h"

static uint16_t get_be16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static uint32_t get_be32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* Bounded writer: every put checks the remaining room, so no caller does pointer arithmetic. */
struct writer {
	uint8_t *buf;
	size_t   cap;
	size_t   len;
	int      overflow;
};

static void put_bytes(struct writer *w, const void *src, size_t n)
{
	if (w->overflow || n > w->cap - w->len) {
		w->overflow = 1;
		return;
	}
	memcpy(w->buf + w->len, src, n);
	w->len += n;
}

static void put_u8(struct writer *w, uint8_t v) { put_bytes(w, &v, 1); }
static void put_be16(struct writer *w, uint16_t v)
{
	uint8_t b[2] = { (uint8_t)(v >> 8), (uint8_t)v };
	put_bytes(w, b, 2);
}
static void put_be32(struct writer *w, uint32_t v)
{
	uint8_t b[4] = { (uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v };
	put_bytes(w, b, 4);
}

static void put_string(struct writer *w, const char *s)
{
	size_t n = s ? strlen(s) : 0;
	if (n > CTL_MAX_STRING)
		n = CTL_MAX_STRING;
	put_u8(w, (uint8_t)n);
	put_bytes(w, s, n);
}

static void put_header(struct writer *w, uint8_t type, uint32_t seq)
{
	put_be16(w, CTL_MAGIC);
	put_u8(w, CTL_VERSION);
	put_u8(w, type);
	put_be32(w, seq);
}

static int finish(struct writer *w, struct ctl_counters *cnt)
{
	if (w->overflow) {
		cnt->no_room++;
		return -1;
	}
	return (int)w->len;
}

static int error_response(struct writer *w, uint32_t seq, uint8_t code, struct ctl_counters *cnt)
{
	put_header(w, CTL_MSG_ERROR_RSP, seq);
	put_u8(w, code);
	return finish(w, cnt);
}

int ctl_handle(const uint8_t *req, size_t req_len, uint8_t *rsp, size_t rsp_cap,
               const struct ctl_identity *id, struct ctl_counters *cnt)
{
	struct writer w = { rsp, rsp_cap, 0, 0 };
	uint8_t  version, type;
	uint32_t seq;

	if (req == NULL || req_len < CTL_HEADER_SIZE) {
		cnt->short_drop++;
		return 0;
	}
	if (get_be16(req) != CTL_MAGIC) {
		cnt->magic_drop++;
		return 0;
	}
	version = req[2];
	type    = req[3];
	seq     = get_be32(req + 4);
	if (type & CTL_RESPONSE) {
		cnt->response_drop++;
		return 0;
	}
	if (version != CTL_VERSION) {
		cnt->bad_version++;
		return error_response(&w, seq, CTL_ERR_BAD_VERSION, cnt);
	}

	switch (type) {
	case CTL_MSG_IDENTIFY:
		if (req_len != CTL_IDENTIFY_REQ_LENGTH) {
			cnt->bad_length++;
			return error_response(&w, seq, CTL_ERR_BAD_LENGTH, cnt);
		}
		put_header(&w, CTL_MSG_IDENTIFY_RSP, seq);
		put_bytes(&w, id->mac, 6);
		put_be32(&w, id->ip);
		put_be16(&w, id->ctl_port);
		put_be32(&w, id->sys_clk_hz);
		put_u8(&w, id->eth_dw);
		put_string(&w, id->board);
		put_string(&w, id->build_id);
		put_string(&w, id->ident);
		if (!w.overflow)
			cnt->requests++;
		return finish(&w, cnt);
	default:
		cnt->bad_type++;
		return error_response(&w, seq, CTL_ERR_BAD_TYPE, cnt);
	}
}
