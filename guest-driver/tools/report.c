// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca-tool's check lines: every command prints one
 * "<prefix> <name> PASS|FAIL <detail>" line a check and counts it in
 * n_pass or n_fail, which decide the exit status.
 */
#include <stdarg.h>
#include <stdio.h>

#include "report.h"

int n_pass, n_fail;

/* Prefix of the check lines of the verbs helpers (vcheck). */
const char *vb_prefix = "IBTCA-VERBS";

/* Prints one "<prefix> <name> PASS|FAIL <detail>" line and counts it. */
void vreport(const char *prefix, const char *name, int ok,
	     const char *fmt, va_list ap)
{
	printf("%s %s %s ", prefix, name, ok ? "PASS" : "FAIL");
	vprintf(fmt, ap);
	printf("\n");
	fflush(stdout);
	if (ok)
		n_pass++;
	else
		n_fail++;
}

void vcheck(const char *name, int ok, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport(vb_prefix, name, ok, fmt, ap);
	va_end(ap);
}
