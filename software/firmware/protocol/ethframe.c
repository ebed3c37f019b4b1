/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include <string.h>

#include "ethframe.h"

uint32_t ethframe_crc32(const uint8_t *p, size_t len)
{
	/* Bit by bit: 8 shifts per byte is fast enough for a frame the firmware writes once, and
	 * keeps a 1 KiB table out of the firmware's RAM. */
	uint32_t crc = 0xFFFFFFFFu;
	for (size_t i = 0; i < len; i++) {
		crc ^= p[i];
		for (int b = 0; b < 8; b++)
			crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
	}
	return ~crc;
}

size_t ethframe_wire(uint8_t *out, size_t out_cap, const uint8_t *frame, size_t len)
{
	size_t body = len < ETHFRAME_MIN ? ETHFRAME_MIN : len;
	size_t total = ETHFRAME_PREAMBLE + body + ETHFRAME_FCS;
	uint32_t fcs;

	if (out == NULL || (frame == NULL && len > 0) || body > out_cap || total > out_cap)
		return 0;
	memset(out, 0x55, ETHFRAME_PREAMBLE - 1);
	out[ETHFRAME_PREAMBLE - 1] = 0xD5;
	if (len > 0)
		memcpy(out + ETHFRAME_PREAMBLE, frame, len);
	memset(out + ETHFRAME_PREAMBLE + len, 0, body - len);
	fcs = ethframe_crc32(out + ETHFRAME_PREAMBLE, body);
	for (size_t i = 0; i < ETHFRAME_FCS; i++)
		out[ETHFRAME_PREAMBLE + body + i] = (uint8_t)(fcs >> (8 * i));
	return total;
}
