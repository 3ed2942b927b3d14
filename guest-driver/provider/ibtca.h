/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The ibtca provider: libibverbs' user-space driver for the ibtca virtual
 * InfiniBand TCA (PCI 1234:7ca0).
 */
#ifndef IBTCA_PROVIDER_H
#define IBTCA_PROVIDER_H

#include <pthread.h>
#include <stdint.h>

#include <infiniband/driver.h>

#include <assert.h>

#include "ibtca_abi.h"
#include "ibtca_regs.h"

#define IBTCA_PCI_VENDOR 0x1234
#define IBTCA_PCI_DEVICE 0x7ca0

struct ibtca_device {
	struct verbs_device ibv_dev;
};

/* An open device: the limits the kernel driver reported when it opened. */
struct ibtca_context {
	struct verbs_context ibv_ctx;
	uint32_t max_qp;
	uint32_t max_qp_wr;
	uint32_t max_cq;
	uint32_t max_cqe;
	uint32_t max_mr;
	uint32_t max_pd;
	/* SGEs of a QP's send and receive WQEs at the largest stride. */
	uint32_t max_send_sge;
	uint32_t max_recv_sge;
	uint32_t max_srq_sge;	/* of an SRQ's WQE at the largest stride */
	uint32_t max_qp_rd_atom;
	uint64_t max_mr_size;
	/* The context's doorbell page (SQ, RQ and CQ doorbells), uncached. */
	void *db;
	/*
	 * Whether doorbell records spare doorbells: yes unless
	 * IBTCA_DB_RECORDS=0 in the environment, for comparison (the records
	 * are still kept, but every post rings and polls report at the
	 * slack, as without them).
	 */
	int db_records;
	/* The context's QPs by QP number, for poll_cq (qp.c). */
	pthread_mutex_t qp_lock;
	struct ibtca_qp **qp_table;
	uint32_t qp_table_size;	/* a power of two; open addressing */
};

/* A CQ: the device's ring of struct ibtca_cqe, mapped. */
struct ibtca_cq {
	union {		/* verbs_cq for ibv_create_cq_ex (cq_ex.c) */
		struct ibv_cq ibv_cq;
		struct verbs_cq vcq;
	};
	pthread_spinlock_t lock;
	struct ibtca_cqe *ring;
	size_t ring_bytes;
	uint32_t cqn;
	uint32_t log;
	uint32_t ci;		/* the next entry to read */
	uint32_t reported;	/* the consumer index the device last got */
	uint32_t slack;		/* entries the device may not know consumed */
	struct ibv_wc ex_wc;	/* the entry ibv_start/next_poll stand on */
	/* Where the device reads the consumer index (NULL: doorbells only). */
	struct ibtca_cq_db_record *db_record;
};

/* What the caller asked of one send slot. */
struct ibtca_swr {
	uint64_t wr_id;
	int signaled;
};

/* An RC QP: its send and receive queues, mapped. */
struct ibtca_qp {
	union {		/* verbs_qp for ibv_create_qp_ex (qp_ex.c) */
		struct ibv_qp ibv_qp;
		struct verbs_qp vqp;
	};
	pthread_spinlock_t sq_lock, rq_lock;
	void *ring;
	size_t ring_bytes;
	/* Slots of 2^sq_log_stride and 2^rq_log_stride bytes. */
	char *sq;
	char *rq;
	uint32_t sq_log_stride, rq_log_stride;
	/* The SGEs one send and one receive slot hold. */
	uint32_t max_send_sge, max_recv_sge;
	uint32_t log;
	uint32_t sq_pi, sq_done;	/* posted, completed send WQEs */
	uint32_t rq_pi, rq_done;	/* posted, completed receive WQEs */
	struct ibtca_swr *swr;		/* per send slot */
	/* The doorbell record the device reads (NULL: doorbells only). */
	struct ibtca_db_record *db_record;
	int sq_sig_all;
	uint16_t dlid;			/* the path's, reported as slid */
	uint8_t sl;
	struct ibtca_wr_batch *wrb;	/* ibv_wr_* requests being built */
};

/* The ibv_wr_* requests built since ibv_wr_start (qp_ex.c). */
struct ibtca_wr_batch {
	uint32_t size;		/* slots: the send queue's entries */
	uint32_t sges;		/* SGEs per slot: the QP's max_send_sge */
	uint32_t n;		/* requests built */
	int err;		/* the first error, reported by wr_complete */
	struct ibv_send_wr *wr;
	struct ibv_sge *sge;	/* the QP's max_send_sge per request */
	uint8_t *inl;		/* IBTCA_MAX_INLINE_DATA per request */
};

/*
 * A response's WQE stride (0 from an older driver: 128 bytes), or 0 if
 * the device takes no such stride.
 */
static inline uint32_t ibtca_resp_stride(uint32_t log_stride)
{
	if (!log_stride)
		return IBTCA_RECV_LOG_STRIDE;
	if (log_stride < IBTCA_RECV_LOG_STRIDE ||
	    log_stride > IBTCA_MAX_RECV_LOG_STRIDE)
		return 0;
	return log_stride;
}

/* A shared receive queue: the device's ring of receive WQEs, mapped. */
struct ibtca_srq {
	struct ibv_srq ibv_srq;
	pthread_spinlock_t lock;	/* serialises post_srq_recv */
	char *ring;			/* slots of 2^log_stride bytes */
	size_t ring_bytes;
	uint32_t srqn;
	uint32_t log;
	uint32_t log_stride;
	uint32_t max_sge;		/* the SGEs one slot holds */
	uint32_t max_wr;		/* posted and not completed, at most */
	uint32_t pi;			/* posted */
	uint32_t done;			/* receive completions seen */
};

/*
 * An address handle: the address vector fields of a UD send WQE, copied
 * into each WQE posted with it (the device keeps no AH objects).
 */
struct ibtca_ah {
	struct ibv_ah ibv_ah;
	struct ibtca_ud_send_wqe av;
};

static inline struct ibtca_ah *to_ibtca_ah(struct ibv_ah *ibah)
{
	return container_of(ibah, struct ibtca_ah, ibv_ah);
}

static inline struct ibtca_context *to_ibtca_ctx(struct ibv_context *ibctx)
{
	return container_of(ibctx, struct ibtca_context, ibv_ctx.context);
}

static inline struct ibtca_cq *to_ibtca_cq(struct ibv_cq *ibcq)
{
	return container_of(ibcq, struct ibtca_cq, ibv_cq);
}

static inline struct ibtca_qp *to_ibtca_qp(struct ibv_qp *ibqp)
{
	return container_of(ibqp, struct ibtca_qp, ibv_qp);
}

static inline struct ibtca_srq *to_ibtca_srq(struct ibv_srq *ibsrq)
{
	return container_of(ibsrq, struct ibtca_srq, ibv_srq);
}


/* verbs.c: the verbs of this version. */
extern const struct verbs_context_ops ibtca_ctx_ops;

/* cq.c: CQs, polled and armed in user space. */
struct ibv_cq *ibtca_create_cq(struct ibv_context *ibctx, int cqe,
			       struct ibv_comp_channel *channel,
			       int comp_vector);
int ibtca_destroy_cq(struct ibv_cq *ibcq);
int ibtca_poll_cq(struct ibv_cq *ibcq, int ne, struct ibv_wc *wc);
int ibtca_req_notify_cq(struct ibv_cq *ibcq, int solicited_only);

/* qp.c: RC QPs and their table. */
struct ibv_qp *ibtca_create_qp(struct ibv_pd *pd,
			       struct ibv_qp_init_attr *attr);
/*
 * qp_options.c: seed 002's MSN start and ACK policy from the environment
 * (IBTCA_MSN_START, IBTCA_ACK), read once: 0 and the choices in @o, or
 * EINVAL for a bad value (said on stderr).
 */
struct ibtca_modify_qp_cmd;
int ibtca_qp_env_options(struct ibtca_modify_qp_cmd *o);
/*
 * The modify of an RC QP to RTR with the environment's choices as driver
 * data: *@sent 0 when there are none to send (the caller modifies as
 * usual), else 1 and the command's result; EINVAL for a bad environment.
 */
int ibtca_modify_qp_options(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
			    int attr_mask, int *sent);
int ibtca_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
		    int attr_mask);
int ibtca_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
		   int attr_mask, struct ibv_qp_init_attr *init_attr);
int ibtca_destroy_qp(struct ibv_qp *ibqp);
/* Frees the ibv_wr_* batch of @qp (qp_ex.c builds it), if it has one. */
void ibtca_wr_batch_free(struct ibtca_qp *qp);
struct ibtca_qp *ibtca_qp_lookup(struct ibtca_context *ctx, uint32_t qpn);
/* A completion of the send (@recv 0) or receive queue frees a slot. */
void ibtca_qp_completed(struct ibtca_qp *qp, int recv);

/* post.c: work requests into the mapped queues. */
struct ibv_ah *ibtca_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr);
int ibtca_destroy_ah(struct ibv_ah *ibah);

int ibtca_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		    struct ibv_send_wr **bad_wr);
int ibtca_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		    struct ibv_recv_wr **bad_wr);
/*
 * Posts one DRDMA work request (IBTCA_WR_DRDMA_WRITE or _READ) of @len
 * bytes through window range @arr, signaled (drdma.c); ENOMEM: no room.
 */
int ibtca_post_direct(struct ibv_qp *ibqp, uint8_t opcode, uint32_t arr,
		      uint32_t len, uint64_t remote_addr, uint32_t rkey,
		      uint64_t wr_id);
/* An 8-byte doorbell at @offset of the context's doorbell page. */
void ibtca_doorbell(struct ibtca_context *ctx, uint32_t offset, uint32_t num,
		    uint32_t index);
/* The device's opcode for send request @wr, or -1 if @qp cannot take it. */
int ibtca_send_check(struct ibtca_qp *qp, const struct ibv_send_wr *wr);

/* qp_ex.c: ibv_create_qp_ex and the ibv_wr_* API. */
extern const struct verbs_context_ops ibtca_qp_ex_ops;

/* cq_ex.c: ibv_create_cq_ex and ibv_start_poll/next_poll/end_poll. */
extern const struct verbs_context_ops ibtca_cq_ex_ops;

/* mw.c: memory windows (types 1 and 2), bound by IBV_WR_BIND_MW. */
extern const struct verbs_context_ops ibtca_mw_ops;

/* Fills receive WQE @w from @wr (its SGE count checked). */
void ibtca_recv_wqe(struct ibtca_recv_wqe *w, const struct ibv_recv_wr *wr);

/* srq.c: shared receive queues. */
struct ibv_srq *ibtca_create_srq(struct ibv_pd *pd,
				 struct ibv_srq_init_attr *attr);
int ibtca_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr,
		     int attr_mask);
int ibtca_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr);
int ibtca_destroy_srq(struct ibv_srq *ibsrq);
int ibtca_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
			struct ibv_recv_wr **bad_wr);
/* A receive completion of a QP on @ibsrq frees one of its slots. */
void ibtca_srq_completed(struct ibv_srq *ibsrq);

#endif /* IBTCA_PROVIDER_H */
