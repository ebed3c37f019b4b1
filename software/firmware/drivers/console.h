/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Console output that never blocks the main loop. printf waits for the UART, and a status line of
 * a thousand characters then holds up the network for milliseconds: long enough for PTP messages
 * and control requests to overflow the CPU port's buffers. console_printf() queues the line in a
 * ring, console_poll() (from the main loop) moves it to the UART while the UART has room; a line
 * that does not fit is dropped whole and counted.
 */
#ifndef ETHDAQ_CONSOLE_H
#define ETHDAQ_CONSOLE_H

#include <stdint.h>

void console_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void console_poll(void);
uint32_t console_dropped(void);  /* lines dropped because the ring was full */

#endif
