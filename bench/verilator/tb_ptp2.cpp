// This file is part of ethdaq.
// SPDX-License-Identifier: BSD-2-Clause
//
// Two-board PTP testbench (bench/ptp2.py): boards m and s (complete SoCs, wrapped in top.v) on
// one 125 MHz clock, GMII pins crossed through a delay line of `cable` cycles each way.
//
//   Vtop cycles=N cable=C m_osc=A s_osc=B sample=K
//
// cable: cycles from a change at one board's TX pins to the same change at the other's RX pins.
// With 0 the wire has no length: a TX register's output (after edge k) is sampled by the
// receiver's input register at edge k + 1, as if the pins were joined; with C it is sampled at
// edge k + 1 + C. The pin-to-pin delay is therefore exactly C cycles (C x 8 ns).
//
// m_osc/s_osc: each board's oscillator error, signed 2^-F ns per cycle (tsu.PTPClock osc_error).
// Prints each board's console lines as "M: text" / "S: text", and every K cycles
// "T cycle m_time_ns s_time_ns": both PTP clocks read after the same clock edge.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "Vtop.h"
#include "tbutil.h"
#include "verilated.h"

struct Gmii { uint8_t data, en, er; };

int main(int argc, char **argv)
{
	Verilated::commandArgs(argc, argv);
	uint64_t cycles = arg(argc, argv, "cycles", 1000000);
	uint64_t cable  = arg(argc, argv, "cable", 50);
	uint64_t sample = arg(argc, argv, "sample", 125000);
	int32_t  m_osc  = (int32_t)arg(argc, argv, "m_osc", 0);
	int32_t  s_osc  = (int32_t)arg(argc, argv, "s_osc", 0);
	if (sample < 1) {
		fprintf(stderr, "sample must be >= 1 cycle\n");
		return 2;
	}
	size_t depth = cable + 1;
	Vtop *top = new Vtop;
	// Delay lines, indexed by cycle modulo their length: what the TX pins show after edge k is
	// on the RX pins for edge k + 1 + cable.
	std::vector<Gmii> m2s(depth, Gmii{0, 0, 0}), s2m(depth, Gmii{0, 0, 0});
	Console mc{'M', {}}, sc{'S', {}};

	power_on(top, m_osc, s_osc);
	for (uint64_t k = 0; k < cycles; k++) {
		size_t slot = k % depth;
		if (k == 8)
			top->sys_rst = 0;
		top->m_gmii_eth_rx_data = s2m[slot].data;
		top->m_gmii_eth_rx_dv   = s2m[slot].en;
		top->m_gmii_eth_rx_er   = s2m[slot].er;
		top->s_gmii_eth_rx_data = m2s[slot].data;
		top->s_gmii_eth_rx_dv   = m2s[slot].en;
		top->s_gmii_eth_rx_er   = m2s[slot].er;
		clock_cycle(top, mc, sc);
		m2s[slot] = Gmii{top->m_gmii_eth_tx_data, top->m_gmii_eth_tx_en, top->m_gmii_eth_tx_er};
		s2m[slot] = Gmii{top->s_gmii_eth_tx_data, top->s_gmii_eth_tx_en, top->s_gmii_eth_tx_er};
		if (k % sample == 0) {
			printf("T %llu %llu %llu\n", (unsigned long long)k,
			       (unsigned long long)top->m_ptp_time_ns, (unsigned long long)top->s_ptp_time_ns);
			fflush(stdout);
		}
	}
	top->final();
	delete top;
	return 0;
}
