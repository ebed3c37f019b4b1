/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include <stdarg.h>
#include <stdio.h>

#include <generated/csr.h>

#include "console.h"

#define RING 4096u  /* power of two */

static char ring[RING];
static uint32_t head, tail;   /* free-running; head - tail = bytes queued */
static uint32_t dropped;
static char line[1536];

void console_printf(const char *fmt, ...)
{
	va_list ap;
	int n;
	uint32_t i, need;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((uint32_t)n >= sizeof(line))
		n = sizeof(line) - 1;  /* truncated by vsnprintf; keep the newline */
	if (n > 0 && line[n - 1] != '\n')
		line[n - 1] = '\n';
	need = (uint32_t)n;
	for (i = 0; i < (uint32_t)n; i++)
		need += line[i] == '\n';  /* a '\r' goes before each */
	if (RING - (head - tail) < need) {
		dropped++;
		return;
	}
	for (i = 0; i < (uint32_t)n; i++) {
		if (line[i] == '\n')
			ring[head++ & (RING - 1)] = '\r';  /* terminals want CR LF, as libbase's console sends */
		ring[head++ & (RING - 1)] = line[i];
	}
	console_poll();
}

void console_poll(void)
{
	while (tail != head && !uart_txfull_read()) {
		uart_rxtx_write((uint8_t)ring[tail & (RING - 1)]);
		tail++;
	}
}

uint32_t console_dropped(void)
{
	return dropped;
}
