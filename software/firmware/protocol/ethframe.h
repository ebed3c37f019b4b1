/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Ethernet frames as the PHY sends them: preamble and SFD, the frame padded to the 60-byte minimum,
 * then the FCS (IEEE 802.3 CRC-32, least significant byte first). Pure C over byte buffers: the
 * firmware builds the launcher's frames with it (drivers/launcher.c), host tests check it against
 * zlib.
 */
#ifndef ETHDAQ_ETHFRAME_H
#define ETHDAQ_ETHFRAME_H

#include <stddef.h>
#include <stdint.h>

#define ETHFRAME_PREAMBLE 8u   /* 7 x 0x55, SFD 0xD5 */
#define ETHFRAME_MIN      60u  /* Destination MAC to the end of the payload, before the FCS. */
#define ETHFRAME_FCS      4u

/* IEEE 802.3 CRC-32 of len bytes (the FCS value; zlib's crc32 computes the same). */
uint32_t ethframe_crc32(const uint8_t *p, size_t len);

/* Writes the wire bytes of `frame` (len bytes, destination MAC to end of payload) into out; returns
 * their number, or 0 if they do not fit out_cap (nothing is written then). */
size_t ethframe_wire(uint8_t *out, size_t out_cap, const uint8_t *frame, size_t len);

#endif
