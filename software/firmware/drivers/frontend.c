/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include <generated/csr.h>
#include <generated/soc.h>

#include "frontend.h"

#ifdef CSR_FRONTEND_BASE

int frontend_present(void)
{
	return 1;
}

/* ETHDAQ_FRONTEND_CSR_BYTES (soc/daqsoc.py): the bytes the front-end's registers take from
 * CSR_FRONTEND_BASE, 4 per 32-bit word. */
int frontend_regs(int write, uint16_t offset, uint8_t count, uint32_t *words)
{
	if (count == 0 || count > CTL_REG_MAX_WORDS || (offset & 3u) ||
	    (uint32_t)offset + 4u * count > ETHDAQ_FRONTEND_CSR_BYTES)
		return CTL_ERR_BAD_VALUE;
	if (write)
		for (unsigned i = 0; i < count; i++)
			csr_write_simple(words[i], CSR_FRONTEND_BASE + offset + 4u * i);
	for (unsigned i = 0; i < count; i++)
		words[i] = csr_read_simple(CSR_FRONTEND_BASE + offset + 4u * i);
	return 0;
}

#else

int frontend_present(void)
{
	return 0;
}

int frontend_regs(int write, uint16_t offset, uint8_t count, uint32_t *words)
{
	(void)write; (void)offset; (void)count; (void)words;
	return CTL_ERR_UNSUPPORTED;
}

#endif
