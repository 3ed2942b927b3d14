/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ibtca: the rings of a CQ and of a QP in coherent DMA memory, and the
 * doorbells that hand them to the device. Both the ioctl verbs
 * (ibtca_verbs.c) and the kernel verbs (ibtca_ib_cq.c, ibtca_ib_qp.c) drive
 * their objects through these helpers (ibtca_ring.c); the callers do the
 * locking.
 */
#ifndef _IBTCA_RING_H
#define _IBTCA_RING_H

#include "ibtca.h"

/* The vector of the ioctl path's CQs (kernel CQs may have their own). */
#define IBTCA_CQ_VECTOR		1

struct ibtca_cq_ring {
	u32 cqn;
	u32 log;
	u32 ci;			/* consumer index (the next entry to read) */
	u8 vector;
	size_t size;
	struct ibtca_cqe *ring;
	dma_addr_t dma;
	/* Its doorbell record, if bound (ibtca_cq_ring_bind_record()). */
	struct ibtca_cq_db_record *rec;
	dma_addr_t rec_dma;
	/* The device takes arm requests in the record (CAP_CQ_RECORD_ARM). */
	bool rec_arm;
	u32 arm_count;		/* the record's arm word, bits 31:2 */
};

struct ibtca_qp_ring {
	u32 qpn;
	u32 log;		/* 2^log send slots */
	u32 rq_log;		/* 2^rq_log receive slots */
	u32 rq_log_stride;	/* of 2^rq_log_stride bytes each */
	u32 log_stride;		/* send slots of 2^log_stride bytes each */
	u32 sq_pi, sq_done;	/* posted, completed send requests */
	u32 rq_pi, rq_done;	/* posted, completed receive requests */
	size_t size;
	void *mem;		/* SQ, RQ and quasi-WQE ring */
	dma_addr_t dma;
	struct ibtca_send_wqe *sq;
	struct ibtca_recv_wqe *rq;
	/* Its doorbell record, if bound (ibtca_qp_ring_bind_record()). */
	struct ibtca_db_record *rec;
	dma_addr_t rec_dma;
};

/* CQs: 2^@log entries raising @vector when armed. Called with hw_sem. */
int ibtca_cq_ring_create(struct ibtca_dev *idev, struct ibtca_cq_ring *r,
			 u32 log, u8 vector);
/* The same, rung only through doorbell page @db_page (0: the kernel's). */
int ibtca_cq_ring_create_db(struct ibtca_dev *idev, struct ibtca_cq_ring *r,
			    u32 log, u8 vector, u32 db_page);
void ibtca_cq_ring_free(struct ibtca_dev *idev, struct ibtca_cq_ring *r);
struct ibtca_cqe *ibtca_cq_ring_next(struct ibtca_cq_ring *r);
/* Past the owner bit of an entry ibtca_cq_ring_next() returned. */
void ibtca_cqe_begin_read(void);
void ibtca_cq_ring_db(struct ibtca_dev *idev, struct ibtca_cq_ring *r, u8 arm);
/* Hands consumed entries back: in the record if bound, else a doorbell. */
void ibtca_cq_ring_consumed(struct ibtca_dev *idev, struct ibtca_cq_ring *r);
/*
 * Arms the CQ (IBTCA_CQ_ARM_* @arm) through its record, fenced: false if
 * it has no record the device takes arms from (ring the doorbell). After
 * true, a completion ibtca_cq_ring_next() still finds may have been
 * written before the device saw the request.
 */
bool ibtca_cq_ring_arm_record(struct ibtca_cq_ring *r, u8 arm);

/* QPs: SQ, RQ and quasi-WQE ring of 2^@log entries. Called with hw_sem. */
int ibtca_qp_ring_create(struct ibtca_dev *idev, struct ibtca_qp_ring *r,
			 u32 pdn, u32 send_cqn, u32 recv_cqn, u32 log);
/* The same, rung through @db_page, its receives from SRQ @srqn if not 0. */
int ibtca_qp_ring_create_db(struct ibtca_dev *idev, struct ibtca_qp_ring *r,
			    u32 pdn, u32 send_cqn, u32 recv_cqn, u32 log,
			    u32 db_page, u32 srqn);
/* The same for a QP of IBTCA_QPT_* @qp_type. */
int ibtca_qp_ring_create_type(struct ibtca_dev *idev, struct ibtca_qp_ring *r,
			      u32 pdn, u32 send_cqn, u32 recv_cqn, u32 log,
			      u32 db_page, u32 srqn, u8 qp_type);

/*
 * The log2 sizes of a QP's send, receive and quasi-WQE rings, and of its
 * receive and send WQEs' strides (0: IBTCA_RECV_LOG_STRIDE, 128 bytes).
 */
struct ibtca_qp_logs {
	u32 sq, rq, quasi, rq_stride, sq_stride;
};

/*
 * ibtca_qp_ring_create_type() with each ring sized on its own: a kernel
 * consumer asking for many sends and few receives (nvmet-rdma's RDMA
 * contexts) gets one large ring, not three.
 */
int ibtca_qp_ring_create_sized(struct ibtca_dev *idev, struct ibtca_qp_ring *r,
			       u32 pdn, u32 send_cqn, u32 recv_cqn,
			       const struct ibtca_qp_logs *logs, u32 db_page,
			       u32 srqn, u8 qp_type);
void ibtca_qp_ring_free(struct ibtca_dev *idev, struct ibtca_qp_ring *r);
void ibtca_qp_ring_reset(struct ibtca_qp_ring *r);
/* The next free send or receive slot, zeroed; NULL if the queue is full. */
struct ibtca_send_wqe *ibtca_sq_slot(struct ibtca_qp_ring *r);
struct ibtca_recv_wqe *ibtca_rq_slot(struct ibtca_qp_ring *r);
/* Doorbells for every slot taken so far (writeq() orders the WQEs first). */
void ibtca_sq_db(struct ibtca_dev *idev, struct ibtca_qp_ring *r);
void ibtca_rq_db(struct ibtca_dev *idev, struct ibtca_qp_ring *r);
/* A completion of the send (@recv false) or receive queue frees a slot. */
void ibtca_qp_ring_completed(struct ibtca_qp_ring *r, bool recv);
void ibtca_qp_ring_sent(struct ibtca_qp_ring *r, u32 slot);
/*
 * Doorbell records (IBTCA_CMD_QP_DB_RECORD, IBTCA_CMD_CQ_DB_RECORD; the
 * protocol is device/tca/src/verbs/db_record.rs's): 0, or the command's error,
 * and then the ring goes on with doorbells alone. Called with hw_sem.
 */
int ibtca_qp_ring_bind_record(struct ibtca_dev *idev, struct ibtca_qp_ring *r);
int ibtca_cq_ring_bind_record(struct ibtca_dev *idev, struct ibtca_cq_ring *r);

#endif /* _IBTCA_RING_H */
