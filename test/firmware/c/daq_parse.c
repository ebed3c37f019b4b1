/*
 * Parses a DAQ header (hex on stdin) with the generated daq_format.h offsets and prints its
 * fields, so tests can check the C view of the wire format against the shared vectors.
 */
#include <stdint.h>
#include <stdio.h>

#include <generated/daq_format.h>

static uint64_t be(const uint8_t *p, int n)
{
	uint64_t v = 0;
	for (int i = 0; i < n; i++)
		v = (v << 8) | p[i];
	return v;
}

int main(void)
{
	uint8_t h[DAQ_HEADER_LEN];
	unsigned x;
	for (unsigned i = 0; i < DAQ_HEADER_LEN; i++) {
		if (scanf("%2x", &x) != 1)
			return 1;
		h[i] = (uint8_t)x;
	}
	if (be(h + DAQ_MAGIC_OFFSET, 2) != DAQ_MAGIC || h[DAQ_VERSION_OFFSET] != DAQ_VERSION)
		return 2;
	printf("stream_id=%llu seq=%llu timestamp=%llu sample_count=%llu sample_bits=%u flags=%llu dropped=%llu run=%llu\n",
	       (unsigned long long)be(h + DAQ_STREAM_ID_OFFSET, 2), (unsigned long long)be(h + DAQ_SEQ_OFFSET, 8),
	       (unsigned long long)be(h + DAQ_TIMESTAMP_OFFSET, 8), (unsigned long long)be(h + DAQ_SAMPLE_COUNT_OFFSET, 2),
	       h[DAQ_SAMPLE_BITS_OFFSET], (unsigned long long)be(h + DAQ_FLAGS_OFFSET, 2),
	       (unsigned long long)be(h + DAQ_DROPPED_OFFSET, 8), (unsigned long long)be(h + DAQ_RUN_OFFSET, 4));
	return 0;
}
