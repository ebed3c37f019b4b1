/*
 * Host harness for software/firmware/ctl.c: reads one request datagram from stdin, writes the
 * response (possibly empty) to stdout and the counters and the board calls it made to stderr,
 * so tests in Python can check the firmware's parser byte for byte against ethdaq.host.protocol.
 * Usage: ctl_host [response capacity] [src ip] [stub error code]
 */
#include <stdio.h>
#include <stdlib.h>

#include "ctl.h"

static int stub_error;

static int stream_start(const struct ctl_stream_cfg *c, uint32_t *run)
{
	fprintf(stderr, "call=stream_start dst_ip=%u dst_port=%u payload=%u enable=%u backpressure=%u gap=%u "
		"dst_mac=%02x:%02x:%02x:%02x:%02x:%02x\n",
		c->dst_ip, c->dst_port, c->payload, c->enable, c->backpressure, c->gap,
		c->dst_mac[0], c->dst_mac[1], c->dst_mac[2], c->dst_mac[3], c->dst_mac[4], c->dst_mac[5]);
	*run = 42;
	return stub_error;
}

static int stream_stop(uint32_t *run)
{
	fprintf(stderr, "call=stream_stop\n");
	*run = 42;
	return stub_error;
}

static int emulator(const struct ctl_emulator_cfg *c)
{
	fprintf(stderr, "call=emulator mode=%u rate=%u seed=%u\n", c->mode, c->rate, c->seed);
	return stub_error;
}

static void status(struct ctl_status *st)
{
	st->running = 1; st->run = 42; st->datagrams = 0x0000000100000002ull; st->dropped = 7;
	st->port_rx_dropped = 3; st->port_tx_dropped = 4; st->arp_timeouts = 5;
	st->dst_flags = CTL_DST_VALID; st->stale = 6;
	for (int i = 0; i < 6; i++)
		st->dst_mac[i] = (uint8_t)(0xa0 + i);
}

int main(int argc, char **argv)
{
	static uint8_t req[65536], rsp[2048];
	struct ctl_counters cnt = {0};
	struct ctl_identity id = {
		.mac = {0x10, 0xe2, 0xd5, 0x00, 0x00, 0x01},
		.ip = 0xC0A80132u, .ctl_port = 7000, .sys_clk_hz = 125000000u, .eth_dw = 8,
		.nchannels = 4, .sample_bits = 16, .max_payload = 8972,
		.board = "sim", .build_id = "0123456789ab", .ident = "ethdaq sim test",
	};
	struct ctl_ops ops = { stream_start, stream_stop, emulator, status };
	size_t cap = argc > 1 ? (size_t)atoi(argv[1]) : sizeof(rsp);
	uint32_t src_ip = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 0) : 0xC0A80164u;
	size_t n = fread(req, 1, sizeof(req), stdin);
	int r;
	stub_error = argc > 3 ? atoi(argv[3]) : 0;
	r = ctl_handle(req, n, src_ip, rsp, cap, &id, &ops, &cnt);
	if (r > 0)
		fwrite(rsp, 1, (size_t)r, stdout);
	fprintf(stderr, "ret=%d requests=%u short=%u magic=%u response=%u version=%u type=%u length=%u refused=%u no_room=%u\n",
		r, cnt.requests, cnt.short_drop, cnt.magic_drop, cnt.response_drop, cnt.bad_version,
		cnt.bad_type, cnt.bad_length, cnt.refused, cnt.no_room);
	return 0;
}
