// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca-verbs' check lines: one "<tag> <name> PASS|FAIL <detail>" line a
 * check, counted in n_pass or n_fail (report.h).
 */
#include <stdarg.h>
#include <stdio.h>

#include "report.h"

int n_pass, n_fail;
const char *check_prefix = "IBTCA-VERBS";

void check(const char *name, int ok, const char *fmt, ...)
{
	va_list ap;

	printf("%s %s %s ", check_prefix, name, ok ? "PASS" : "FAIL");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (ok)
		n_pass++;
	else
		n_fail++;
}
