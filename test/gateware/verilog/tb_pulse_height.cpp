// This file is part of ethdaq.
// SPDX-License-Identifier: BSD-2-Clause
//
// examples/frontends/pulse_height.v on its own under Verilator (test/gateware/test_pulse_height.py): the
// clock, a reset, `time_ns` = T0 + 8 ns per cycle after the reset, and each channel's `ready`
// high with a probability; prints every accepted word as "CHANNEL WORD" and at the end
// "pulses PULSES lost LOST".
//   tb_pulse_height CYCLES T0 READY0 READY1 READY2 SEED   (READYn: percent of cycles ready)
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include "Vpulse_height.h"
#include "verilated.h"

int main(int argc, char **argv)
{
	if (argc != 7) {
		fprintf(stderr, "usage: %s CYCLES T0 READY0 READY1 READY2 SEED\n", argv[0]);
		return 2;
	}
	uint64_t cycles = strtoull(argv[1], 0, 0), t0 = strtoull(argv[2], 0, 0);
	int ready[3] = { atoi(argv[3]), atoi(argv[4]), atoi(argv[5]) };
	srand((unsigned)atoi(argv[6]));
	Verilated::commandArgs(argc, argv);
	Vpulse_height *m = new Vpulse_height;
	m->threshold = 1000;
	m->rate = 1u << 24;
	m->rst = 1;
	for (int i = 0; i < 2; i++) {
		m->clk = 0; m->eval();
		m->clk = 1; m->eval();
	}
	m->rst = 0;
	for (uint64_t n = 0; n < cycles; n++) {
		m->clk = 0;
		m->time_ns = t0 + 8 * n;
		m->height_ready = rand() % 100 < ready[0];
		m->width_ready  = rand() % 100 < ready[1];
		m->events_ready = rand() % 100 < ready[2];
		m->eval();
		if (m->height_valid && m->height_ready) printf("0 %u\n", (unsigned)m->height);
		if (m->width_valid && m->width_ready)   printf("1 %u\n", (unsigned)m->width);
		if (m->events_valid && m->events_ready) printf("2 %u\n", (unsigned)m->events);
		m->clk = 1; m->eval();
	}
	printf("pulses %u lost %u\n", (unsigned)m->pulses, (unsigned)m->lost);
	delete m;
	return 0;
}
