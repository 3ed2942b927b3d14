/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ibtca: what kernel tests (test/ibtca_kverbs_dbrec.c) may ask of the
 * driver beyond the verbs API, to see the doorbells a consumer's posts
 * cost (ibtca_ib_probe.c).
 */
#ifndef _IBTCA_IB_PROBE_H
#define _IBTCA_IB_PROBE_H

#include <rdma/ib_verbs.h>

/*
 * BAR0's DOORBELLS: the trapped doorbells the device has received; 0 for
 * a device that is not an ibtca.
 */
u32 ibtca_ib_doorbells(struct ib_device *ibdev);
/*
 * Whether the device says it reads @ibqp's send and receive producer
 * indexes from the QP's doorbell record by itself (its awake words):
 * 0, or -ENOENT for a QP without a record or of another device.
 */
int ibtca_ib_qp_awake(struct ib_qp *ibqp, bool *sq, bool *rq);

#endif /* _IBTCA_IB_PROBE_H */
