/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ibtca_kverbs_lib: what the kernel verbs test modules share (the module
 * ibtca_kverbs_lib.ko, loaded before them): PASS/FAIL console lines and
 * their counts, taking an RC QP to RTS towards a peer, and the ibtca RDMA
 * device.
 */
#ifndef IBTCA_KVERBS_LIB_H
#define IBTCA_KVERBS_LIB_H

#include <rdma/ib_verbs.h>

/* A test's checks: its console lines start with @tag. */
struct kvl_tally {
	const char *tag;
	int passed;
	int failed;
};

/* Prints "<tag> <name> PASS|FAIL <fmt...>", counts it; returns @ok. */
__printf(4, 5) bool kvl_check(struct kvl_tally *t, bool ok, const char *name,
			      const char *fmt, ...);

/* How an RC QP reaches its peer on port 1 (MTU 1024, PSNs from 0). */
struct kvl_path {
	u16 dlid;
	u32 dest_qpn;
	int access;		/* qp_access_flags */
	u8 rd_atomic;		/* max_rd_atomic and max_dest_rd_atomic */
};

/*
 * Takes @qp from any state through RESET, INIT and RTR to RTS along @p,
 * with ACK timeout 14 (67 ms), retry_cnt 7, rnr_retry 7, min_rnr_timer 12.
 */
int kvl_connect(struct ib_qp *qp, const struct kvl_path *p);

/* The first ibtca RDMA device registered, or NULL. */
struct ib_device *kvl_device(void);

#endif /* IBTCA_KVERBS_LIB_H */
