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
	const char *board;
	const char *build_id;
	const char *ident;
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
	uint32_t no_room;       /* Response did not fit the caller's buffer. */
};

/*
 * Handle one request datagram of req_len bytes. Writes the response into rsp (capacity rsp_cap).
 * Returns the response length (> 0), 0 when the request is dropped without answer, or
 * -1 when the response does not fit rsp_cap. Every outcome other than a normal answer
 * increments one counter in cnt.
 */
int ctl_handle(const uint8_t *req, size_t req_len, uint8_t *rsp, size_t rsp_cap,
               const struct ctl_identity *id, struct ctl_counters *cnt);

#endif
