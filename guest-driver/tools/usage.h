/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ibtca-tool's usage text (usage.c): usage() prints it and exits 2.
 */
#ifndef IBTCA_TOOL_USAGE_H
#define IBTCA_TOOL_USAGE_H

#include <stdio.h>

void print_usage(FILE *out);
void usage(void);

#endif /* IBTCA_TOOL_USAGE_H */
