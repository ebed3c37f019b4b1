/*
 * Host harness for software/firmware/ctl.c: reads one request datagram from stdin, writes the
 * response (possibly empty) to stdout and the counters to stderr, so tests in Python can check
 * the firmware's parser byte for byte against ethdaq.host.protocol.
 */
#include <stdio.h>
#include <stdlib.h>

#include "ctl.h"

int main(int argc, char **argv)
{
	static uint8_t req[65536], rsp[2048];
	struct ctl_counters cnt = {0};
	struct ctl_identity id = {
		.mac = {0x10, 0xe2, 0xd5, 0x00, 0x00, 0x01},
		.ip = 0xC0A80132u, .ctl_port = 7000, .sys_clk_hz = 125000000u, .eth_dw = 8,
		.board = "sim", .build_id = "0123456789ab", .ident = "ethdaq sim test",
	};
	size_t cap = argc > 1 ? (size_t)atoi(argv[1]) : sizeof(rsp);
	size_t n = fread(req, 1, sizeof(req), stdin);
	int r = ctl_handle(req, n, rsp, cap, &id, &cnt);
	if (r > 0)
		fwrite(rsp, 1, (size_t)r, stdout);
	fprintf(stderr, "ret=%d requests=%u short=%u magic=%u response=%u version=%u type=%u length=%u no_room=%u\n",
		r, cnt.requests, cnt.short_drop, cnt.magic_drop, cnt.response_drop, cnt.bad_version,
		cnt.bad_type, cnt.bad_length, cnt.no_room);
	return 0;
}
