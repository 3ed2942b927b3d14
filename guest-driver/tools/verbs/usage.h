/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ibtca-verbs' usage text (usage.c), printed by --help and by a command
 * given a bad argument.
 */
#ifndef IBTCA_VERBS_USAGE_H
#define IBTCA_VERBS_USAGE_H

#include <stdio.h>

void print_usage(FILE *out);
/* Prints the usage text to stderr and exits with status 2. */
__attribute__((noreturn)) void usage(void);

#endif /* IBTCA_VERBS_USAGE_H */
