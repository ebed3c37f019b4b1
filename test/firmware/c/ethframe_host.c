/*
 * Host harness for software/firmware/protocol/ethframe.c: reads frames from stdin (u16 big-endian
 * length + bytes, repeated), writes each one's wire bytes (u16 length, 0 if refused, + bytes) to
 * stdout. argv[1]: the output capacity.
 */
#include <stdio.h>
#include <stdlib.h>

#include "ethframe.h"

int main(int argc, char **argv)
{
	static uint8_t in[65536], out[65536];
	size_t cap = argc > 1 ? (size_t)atoi(argv[1]) : sizeof(out);
	int hi, lo;

	if (cap > sizeof(out))
		cap = sizeof(out);
	while ((hi = getchar()) != EOF && (lo = getchar()) != EOF) {
		size_t len = (size_t)(hi << 8 | lo), n;
		if (fread(in, 1, len, stdin) != len)
			return 1;
		n = ethframe_wire(out, cap, in, len);
		putchar((int)(n >> 8));
		putchar((int)(n & 0xff));
		fwrite(out, 1, n, stdout);
	}
	return 0;
}
