// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca-tool's number arguments: decimal, 0x hexadecimal or 0 octal.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "parse.h"

int parse_u32(const char *s, uint32_t *out)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *end || v > 0xffffffffULL) {
		fprintf(stderr, "ibtca-tool: bad number '%s'\n", s);
		return -1;
	}
	*out = (uint32_t)v;
	return 0;
}
