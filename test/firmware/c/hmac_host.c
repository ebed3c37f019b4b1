/*
 * Host harness for software/firmware/protocol/hmac_sha256.c: each stdin line is "KEYHEX MSGHEX" (KEYHEX "-"
 * for a plain SHA-256 of MSG); each stdout line is the digest in hex. MSG is fed in two pieces
 * split at its middle, so hmac_sha256's two-part input is exercised too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmac_sha256.h"

static size_t unhex(const char *h, uint8_t *out, size_t cap)
{
	size_t n = 0;
	while (h[0] && h[1] && n < cap) {
		unsigned v;
		if (sscanf(h, "%2x", &v) != 1)
			break;
		out[n++] = (uint8_t)v;
		h += 2;
	}
	return n;
}

int main(void)
{
	static char line[1 << 20];
	static uint8_t key[4096], msg[1 << 19];
	while (fgets(line, sizeof(line), stdin)) {
		char *sp = strchr(line, ' ');
		uint8_t out[SHA256_DIGEST];
		size_t klen, mlen;
		if (!sp)
			return 2;
		*sp = 0;
		sp[strcspn(sp + 1, "\n") + 1] = 0;
		mlen = unhex(sp + 1, msg, sizeof(msg));
		if (strcmp(line, "-") == 0) {
			struct sha256 s;
			sha256_init(&s);
			sha256_update(&s, msg, mlen / 2);
			sha256_update(&s, msg + mlen / 2, mlen - mlen / 2);
			sha256_final(&s, out);
		} else {
			klen = unhex(line, key, sizeof(key));
			hmac_sha256(key, klen, msg, mlen / 2, msg + mlen / 2, mlen - mlen / 2, out);
		}
		for (int i = 0; i < SHA256_DIGEST; i++)
			printf("%02x", out[i]);
		printf("\n");
	}
	return 0;
}
