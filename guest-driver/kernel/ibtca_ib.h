/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ibtca: private definitions of the ib_device (ibtca_ib.c registers it;
 * ibtca_ib_cq.c, ibtca_ib_qp.c, ibtca_ib_post.c and ibtca_ib_ah.c are its
 * kernel verbs).
 */
#ifndef _IBTCA_IB_H
#define _IBTCA_IB_H

#include <linux/spinlock.h>
#include <linux/xarray.h>
#include <rdma/ib_verbs.h>
#include <rdma/uverbs_ioctl.h>

#include "ibtca_regs.h"
#include "ibtca_ring.h"
#include "ibtca_uverbs_abi.h"

#define IBTCA_IB_PORT		1
/* The first MSI-X vector of kernel CQs (below: commands, ioctl CQs, port). */
#define IBTCA_IB_CQ_VECTOR0	3

struct ibtca_ib {
	struct ib_device ibdev;
	struct ibtca_dev *idev;
	struct ibtca_device_attr attr;	/* QUERY_DEVICE at registration */
	u32 max_mr_pages;		/* from IBTCA_DEVICE_ATTR_EXT */
	u8 max_qp_init_rd_atom;		/* from IBTCA_DEVICE_ATTR_EXT */
	u64 port_guid;
	u16 pkey;
	spinlock_t pkey_lock;		/* guards @pkeys */
	u16 pkeys[IBTCA_PKEY_TABLE_LEN];	/* the agent's table (ibtca_ib_pkey.c) */
	u32 fw;				/* VERSION register */
	bool cq_moderation;		/* CAP_CQ_MODERATION: modify_cq */
	struct mutex cap_lock;		/* serialises modify_port */
	struct xarray qps;		/* device QP number -> ibtca_ib_qp */
	atomic_t next_vector;		/* round robin over the CQ vectors */
	/* Doorbell pages user contexts hold (ibtca_uctx.c); page 0 is ours. */
	DECLARE_BITMAP(db_pages, IBTCA_DB_PAGES);
	/* DRDMA ranges user contexts hold (ibtca_ib_drdma.c). */
	DECLARE_BITMAP(drdma_held, IBTCA_DRDMA_MAX_RANGES);
	/* SRQ limits (IBTCA_DEVICE_ATTR_EXT) and the SRQs, for limit events. */
	u32 max_srq, max_srq_wr, max_srq_sge;
	u32 max_recv_sge;		/* of a QP's own RQ */
	u32 max_send_sge;		/* the device's, at the largest stride */
	struct mutex srq_lock;		/* serialises @srqs */
	struct list_head srqs;		/* ibtca_ib_srq.node */
};

struct ibtca_ib_pd {
	struct ib_pd ibpd;
	u32 pdn;
};

/* A device CQ; its interrupt calls the core's comp_handler. */
struct ibtca_ib_cq {
	struct ib_cq ibcq;
	spinlock_t lock;		/* serialises polling and arming */
	struct ibtca_cq_ring r;
	struct list_head node;		/* in ibtca_dev.kcqs */
	unsigned long armed;		/* bit 0: an event is wanted */
	/* A user CQ: its ring, owned by this mmap entry (ibtca_ib_uqueue.c). */
	struct rdma_user_mmap_entry *user_ring;
	/* Its doorbell record's page, if the device took one. */
	struct rdma_user_mmap_entry *user_db_record;
};

/* What the caller asked of one send slot. */
struct ibtca_ib_swr {
	u64 wr_id;
	bool signaled;
};

/*
 * A device QP: RC, UD, or the MAD layer's QP0/QP1 (the device's SMI and
 * GSI QPs; ibqp.qp_num is 0 or 1, r.qpn the device's number).
 */
struct ibtca_ib_qp {
	struct ib_qp ibqp;
	struct mutex modify_lock;	/* serialises modify_qp and query_qp */
	struct ib_qp_attr attr;		/* what modify_qp set, for query_qp */
	struct ib_qp_cap cap;
	enum ib_sig_type sq_sig_type;
	u16 dlid;			/* the path's, reported as slid */
	spinlock_t sq_lock, rq_lock;
	struct ibtca_qp_ring r;
	struct ibtca_ib_swr *swr;	/* per send slot */
	/* A user QP: its rings, owned by this mmap entry (ibtca_ib_uqueue.c). */
	struct rdma_user_mmap_entry *user_ring;
	/* Its doorbell record's page, if the device took one. */
	struct rdma_user_mmap_entry *user_db_record;
	/* Seed 002 choices for the next modify to RTR or RTS (kernel users). */
	struct ibtca_modify_qp_cmd options;
};

/* A shared receive queue (ibtca_ib_srq.c). */
struct ibtca_ib_srq {
	struct ib_srq ibsrq;
	u32 srqn;
	u32 log;			/* the ring holds 2^log WQEs */
	u32 log_stride;			/* each of 2^log_stride bytes */
	u32 max_wr;			/* posted and not completed, at most */
	u32 pi;				/* posted (kernel SRQs) */
	atomic_t done;			/* receive completions seen */
	u32 limit_events;		/* the device's count last seen */
	spinlock_t lock;		/* serialises post_srq_recv */
	struct mutex modify_lock;	/* serialises modify_srq */
	struct list_head node;		/* in ibtca_ib.srqs */
	size_t size;
	struct ibtca_recv_wqe *ring;
	dma_addr_t dma;
	/* While a kernel SRQ grows: the new ring, posted into as well. */
	struct ibtca_recv_wqe *next_ring;
	u32 next_log;
	/* A user SRQ: its ring, owned by this mmap entry. */
	struct rdma_user_mmap_entry *user_ring;
};

struct ibtca_ib_ah {
	struct ib_ah ibah;
	u16 dlid;
	u8 sl;
	u8 src_path_bits;
	bool grh;			/* the fields below are valid */
	u8 hop_limit;
	u8 traffic_class;
	u32 flow_label;
	u8 dgid[16];
};

static inline struct ibtca_ib_ah *to_ah(struct ib_ah *ibah)
{
	return container_of(ibah, struct ibtca_ib_ah, ibah);
}

static inline bool ibtca_ib_qp_is_datagram(const struct ib_qp *ibqp)
{
	return ibqp->qp_type == IB_QPT_UD || ibqp->qp_type == IB_QPT_SMI ||
	       ibqp->qp_type == IB_QPT_GSI;
}

static inline struct ibtca_ib *to_ib(struct ib_device *ibdev)
{
	return container_of(ibdev, struct ibtca_ib, ibdev);
}

static inline struct ibtca_ib_pd *to_pd(struct ib_pd *ibpd)
{
	return container_of(ibpd, struct ibtca_ib_pd, ibpd);
}

static inline struct ibtca_ib_cq *to_cq(struct ib_cq *ibcq)
{
	return container_of(ibcq, struct ibtca_ib_cq, ibcq);
}

static inline struct ibtca_ib_qp *to_qp(struct ib_qp *ibqp)
{
	return container_of(ibqp, struct ibtca_ib_qp, ibqp);
}

static inline struct ibtca_ib_srq *to_srq(struct ib_srq *ibsrq)
{
	return container_of(ibsrq, struct ibtca_ib_srq, ibsrq);
}

/* ibtca_ib_hw.c: device access on behalf of the core */
int ibtca_ib_hw_begin(struct ibtca_ib *ib);
void ibtca_ib_hw_end(struct ibtca_ib *ib);
int ibtca_ib_cmd(struct ibtca_ib *ib, u8 opcode, const void *params,
		 size_t len, u32 *out0, u32 *out1);
int ibtca_ib_cmd_handle(struct ibtca_ib *ib, u8 opcode, u32 handle);
u32 ibtca_ib_access(int acc);

/* ibtca_ib_drdma.c: DRDMA ranges as uverbs objects (ibtcadv.h). */
extern const struct uapi_definition ibtca_ib_dv_defs[];

/* ibtca_ib_arr.c: the DRDMA ranges contexts hold. */
u32 ibtca_dv_arr_rd(struct ibtca_dev *idev, u32 arr, u32 field);
int ibtca_dv_arr_get(struct ibtca_ib *ib, u32 *arr);
void ibtca_dv_range_release(struct ibtca_ib *ib, u32 arr);

/* ibtca_ib_cq.c */
int ibtca_ib_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		       struct uverbs_attr_bundle *attrs);
int ibtca_ib_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata);
int ibtca_ib_poll_cq(struct ib_cq *ibcq, int num, struct ib_wc *wc);
int ibtca_ib_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags);
int ibtca_ib_modify_cq(struct ib_cq *ibcq, u16 cq_count, u16 cq_period);

/* ibtca_ib_qp.c */
int ibtca_ib_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init,
		       struct ib_udata *udata);
int ibtca_ib_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		       struct ib_udata *udata);
int ibtca_ib_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		      struct ib_qp_init_attr *init);
int ibtca_ib_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata);

/* ibtca_qp_options.c: seed 002's MSN start and ACK policy in modify_qp */
int ibtca_qp_options_from_udata(struct ib_udata *udata,
				struct ibtca_modify_qp_cmd *o);
int ibtca_qp_options_apply(struct ibtca_ib_qp *qp,
			   struct ibtca_cmd_modify_qp *p,
			   const struct ibtca_modify_qp_cmd *user,
			   enum ib_qp_state cur, enum ib_qp_state to);
void ibtca_qp_options_sent(struct ibtca_ib_qp *qp,
			   const struct ibtca_cmd_modify_qp *p);

/* ibtca_ib_uqueue.c: CQs and QPs of user contexts */
int ibtca_ib_create_ucq(struct ibtca_ib *ib, struct ibtca_ib_cq *cq, u32 cqe,
			u8 vector, struct ib_udata *udata);
void ibtca_ib_destroy_ucq_ring(struct ibtca_ib *ib, struct ibtca_ib_cq *cq,
			       int destroyed);
/*
 * The flags a user QP's or SRQ's create asks for (struct
 * ibtca_create_qp_req, ibtca_create_srq_req; 0 without driver data),
 * or -EINVAL for a request it cannot take: a flag outside @known.
 */
int ibtca_ib_ureq_flags(struct ib_udata *udata, u32 known);
/* A user QP: rings of 2^@logs->sq entries each, @logs' strides. */
int ibtca_ib_create_urc(struct ibtca_ib *ib, struct ibtca_ib_qp *qp,
			struct ib_qp_init_attr *init,
			const struct ibtca_qp_logs *logs,
			struct ib_udata *udata);
void ibtca_ib_destroy_uqp_ring(struct ibtca_ib *ib, struct ibtca_ib_qp *qp,
			       int destroyed);

/* ibtca_ib_post.c */
int ibtca_ib_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		       const struct ib_send_wr **bad_wr);
int ibtca_ib_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		       const struct ib_recv_wr **bad_wr);
/* Fills receive WQE @w (zeroed) from @wr (its SGEs checked by the caller). */
void ibtca_ib_recv_wqe(struct ibtca_recv_wqe *w, const struct ib_recv_wr *wr);

/* ibtca_ib_srq.c */
int ibtca_ib_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init,
			struct ib_udata *udata);
int ibtca_ib_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
			enum ib_srq_attr_mask mask, struct ib_udata *udata);
int ibtca_ib_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr);
int ibtca_ib_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata);
int ibtca_ib_post_srq_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
			   const struct ib_recv_wr **bad_wr);
void ibtca_ib_srq_completed(struct ib_srq *ibsrq);

/* ibtca_ib_pkey.c */
bool ibtca_ib_pkeys_read(struct ibtca_ib *ib);
int ibtca_ib_query_pkey(struct ib_device *ibdev, u32 port, u16 index,
			u16 *pkey);
void ibtca_ib_pkey_dispatch(struct ibtca_ib *ib);

/* ibtca_ib_mad.c */
int ibtca_ib_process_mad(struct ib_device *ibdev, int flags, u32 port,
			 const struct ib_wc *in_wc, const struct ib_grh *in_grh,
			 const struct ib_mad *in, struct ib_mad *out,
			 size_t *out_size, u16 *out_pkey_index);

/* ibtca_ib_mcast.c */
int ibtca_ib_attach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid);
int ibtca_ib_detach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid);

/* ibtca_ib_ah.c */
int ibtca_ib_create_ah(struct ib_ah *ibah, struct rdma_ah_init_attr *init,
		       struct ib_udata *udata);
int ibtca_ib_query_ah(struct ib_ah *ibah, struct rdma_ah_attr *attr);
int ibtca_ib_destroy_ah(struct ib_ah *ibah, u32 flags);

#endif /* _IBTCA_IB_H */
