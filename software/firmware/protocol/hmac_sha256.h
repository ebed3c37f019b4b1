/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104) for the control protocol's request
 * authentication: small and plain C, no tables beyond the round constants, so the same code runs
 * on the VexRiscv and on the host (test/test_auth.py checks it against Python's hashlib and hmac
 * and RFC 4231's test vectors).
 */
#ifndef ETHDAQ_HMAC_SHA256_H
#define ETHDAQ_HMAC_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_BLOCK  64
#define SHA256_DIGEST 32

struct sha256 {
	uint32_t h[8];
	uint64_t bytes;          /* Message length so far. */
	uint8_t  block[SHA256_BLOCK];
	size_t   used;           /* Bytes in block. */
};

void sha256_init(struct sha256 *s);
void sha256_update(struct sha256 *s, const uint8_t *data, size_t len);
void sha256_final(struct sha256 *s, uint8_t out[SHA256_DIGEST]);

/* HMAC-SHA256 of the concatenation msg1 || msg2 (either may be empty). */
void hmac_sha256(const uint8_t *key, size_t key_len, const uint8_t *msg1, size_t len1,
		 const uint8_t *msg2, size_t len2, uint8_t out[SHA256_DIGEST]);

/* 1 if the n bytes are equal, in time that does not depend on where they differ. */
int equal_ct(const uint8_t *a, const uint8_t *b, size_t n);

#endif
