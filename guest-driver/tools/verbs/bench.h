/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ibtca-verbs verbs-bench on the guest pair: the command, its server and
 * client and write_bw (bench.c) on the latency ping-pong (bench_lat.c) on
 * the send completions (bench_cq.c).
 */
#ifndef IBTCA_VERBS_BENCH_H
#define IBTCA_VERBS_BENCH_H

#include <stdint.h>

#include "pair.h"

/* 64 B in, then 64 B out: each side's write_lat slots. */
#define BENCH_LAT_OFF	0x150000U
#define BENCH_LAT_LEN	64U

/* MSG_LAT's ok field: how both sides wait for the peer's write. */
#define BENCH_LAT_SPIN	1U
#define BENCH_LAT_NAP	2U

/*
 * Server: answers @iters write_lat pings (after a RESULT that says it is
 * ready), waiting as @how says, then takes its send completions.
 */
int bench_serve_lat(struct pair *p, uint64_t iters, uint32_t how);
/*
 * Client: asks for and runs the write_lat ping-pong, both sides waiting as
 * @how says; prints the IBTCA-PERF write_lat or write_lat_sleep line.
 */
int bench_write_lat(struct pair *p, uint32_t how);
/* Prints an IBTCA-PERF line for @n one-way latencies (sorts @us). */
void bench_print_lat(const char *name, double *us, uint32_t n);

/*
 * bench_cq.c. The send completions on the first QP's CQ are each noted:
 * the time of a success, or the first failure and what completed after it
 * (flushed or not). Every int-returning function returns 0 or a negative
 * errno value unless it says otherwise.
 */
/* The last success was now (the start of a measurement). */
void bench_ok_now(void);
void bench_note(const struct ibv_wc *wc);
/*
 * A request failed: takes the completions of the @out requests still
 * outstanding (waiting at most 10 s for each) and prints one line:
 *
 *   IBTCA-PERF-FAIL TEST size=N wr=ID status=S after_s=T flushed=F other=O
 *
 * (S: enum ibv_wc_status, 12 when the peer stopped answering; T: seconds
 * since the last successful completion).
 */
void bench_fail_report(struct pair *p, const char *test, uint32_t size,
		       uint32_t out);
/*
 * Takes every send completion that is ready, without waiting, in batches;
 * returns how many (and lowers *@out by that), or -EIO for a failed
 * request (noted, with the completions after it in its batch).
 */
int bench_drain(struct pair *p, uint32_t *out);
/* Waits until at most @left sends are outstanding; -EIO if one failed. */
int bench_drain_to(struct pair *p, uint32_t *out, uint32_t left);

#endif /* IBTCA_VERBS_BENCH_H */
