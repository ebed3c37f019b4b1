/*
 * Link probe for the RISC-V target (test/firmware/test_ptp_fw.py): references the stack's entry points so
 * that a --gc-sections link of software/firmware/services/ptp with libgcc shows what the firmware would
 * carry: the stack's code after linker relaxation, and which libgcc helpers it pulls in.
 * Never run.
 */
#include <stddef.h>

#include "ptp_port.h"

/* The firmware's libc provides memcpy (gcc emits it for struct copies even with -fno-builtin). */
void *memcpy(void *dst, const void *src, size_t n);
void *memcpy(void *dst, const void *src, size_t n)
{
	ptp_copy(dst, src, n);
	return dst;
}

void _start(void);
void _start(void)
{
	static struct ptp_port port;
	static struct ptp_config cfg;
	static struct ptp_ops ops;
	static char line[256];
	static const uint8_t mac[6];
	struct ptp_time t = { 0, 0 };

	ptp_config_default(&cfg, mac);
	ptp_port_init(&port, &cfg, &ops, NULL, 0);
	ptp_port_tick(&port, 0);
	ptp_port_receive(&port, NULL, 0, &t);
	ptp_port_tx_timestamp(&port, 0, 0, &t);
	ptp_status_format(line, sizeof(line), ptp_port_status(&port));
	for (;;)
		;
}
