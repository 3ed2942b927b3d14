/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ibtca-tool's number arguments (parse.c).
 */
#ifndef IBTCA_TOOL_PARSE_H
#define IBTCA_TOOL_PARSE_H

#include <stdint.h>

/* 0 and *@out, or -1 (said on stderr) if @s is no number up to 2^32 - 1. */
int parse_u32(const char *s, uint32_t *out);

#endif /* IBTCA_TOOL_PARSE_H */
