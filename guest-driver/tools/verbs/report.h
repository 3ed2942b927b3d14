/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ibtca-verbs' check lines and their counts, which decide a command's exit
 * status (report.c).
 */
#ifndef IBTCA_VERBS_REPORT_H
#define IBTCA_VERBS_REPORT_H

extern int n_pass, n_fail;
/* The tag of the check lines: "IBTCA-VERBS" unless a command sets its own. */
extern const char *check_prefix;
/* Prints one "<check_prefix> <name> PASS|FAIL <detail>" line and counts it. */
void check(const char *name, int ok, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif /* IBTCA_VERBS_REPORT_H */
