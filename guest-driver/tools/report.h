/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ibtca-tool's check lines and their counts, which decide the exit status
 * (report.c).
 */
#ifndef IBTCA_TOOL_REPORT_H
#define IBTCA_TOOL_REPORT_H

#include <stdarg.h>

extern int n_pass, n_fail;
/* Prefix of vcheck() lines ("IBTCA-VERBS"). */
extern const char *vb_prefix;
/* Prints one "<prefix> <name> PASS|FAIL <detail>" line and counts it. */
void vreport(const char *prefix, const char *name, int ok, const char *fmt,
	     va_list ap);
/* vreport() with vb_prefix. */
void vcheck(const char *name, int ok, const char *fmt, ...);

#endif /* IBTCA_TOOL_REPORT_H */
