// This file is part of ethdaq.
// SPDX-License-Identifier: BSD-2-Clause
//
// What the multi-board testbenches share: key=value arguments and the boards' consoles.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

// The text after "key=" among the arguments, or `def`.
static inline const char *text_arg(int argc, char **argv, const char *key, const char *def)
{
	size_t n = strlen(key);
	for (int i = 1; i < argc; i++)
		if (!strncmp(argv[i], key, n) && argv[i][n] == '=')
			return argv[i] + n + 1;
	return def;
}

// A number argument (decimal, 0x hex; negative numbers wrap, as the oscillator errors need).
static inline uint64_t arg(int argc, char **argv, const char *key, uint64_t def)
{
	const char *v = text_arg(argc, argv, key, nullptr);
	return v ? (uint64_t)strtoll(v, nullptr, 0) : def;
}

// A board's UART: whole lines, printed as "<tag>: text".
struct Console {
	char tag;
	std::string line;
	void put(uint8_t c) {
		if (c == '\n') {
			printf("%c: %s\n", tag, line.c_str());
			fflush(stdout);
			line.clear();
		} else if (c != '\r') {
			line.push_back((char)c);
		}
	}
};

// Boards m and s (top.v) at power-on: their oscillator errors set, reset held, the consoles'
// UARTs always ready to give a byte and never sent one.
template <class Top> static void power_on(Top *top, int32_t m_osc, int32_t s_osc)
{
	top->m_ptp_osc_error = (uint32_t)m_osc;
	top->s_ptp_osc_error = (uint32_t)s_osc;
	top->m_serial_source_ready = 1;
	top->s_serial_source_ready = 1;
	top->m_serial_sink_valid = 0;
	top->s_serial_sink_valid = 0;
	top->sim_trace = 0;
	top->sys_rst = 1;
}

// One sys_clk cycle of boards m and s: the falling edge, the byte each console's UART offers
// before the rising edge (taken at it: ready is always 1), then the rising edge.
template <class Top> static void clock_cycle(Top *top, Console &mc, Console &sc)
{
	top->sys_clk = 0;
	top->eval();
	if (top->m_serial_source_valid)
		mc.put(top->m_serial_source_data);
	if (top->s_serial_source_valid)
		sc.put(top->s_serial_source_data);
	top->sys_clk = 1;
	top->eval();
}
