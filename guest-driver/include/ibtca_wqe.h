/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ibtca: how a work request becomes a WQE (struct ibtca_send_wqe,
 * struct ibtca_recv_wqe of ibtca_abi.h), shared by the kernel driver
 * (ibtca_ib_post.c, ibtca_verbs.c) and the rdma-core provider
 * (provider/post.c, which gets a copy of this file beside it from
 * scripts/build-provider.sh, as it gets ibtca_abi.h). The functions take
 * plain values: each side only reads its own work request (struct
 * ib_send_wr, struct ibv_send_wr) and hands the fields over.
 *
 * Opcodes are the uverbs ones (IB_UVERBS_WR_*), which both the kernel's
 * IB_WR_* and libibverbs' IBV_WR_* equal for the operations below.
 */
#ifndef _IBTCA_WQE_H
#define _IBTCA_WQE_H

#ifdef __KERNEL__
#include <linux/string.h>
#include <linux/types.h>
#include <asm/byteorder.h>
#define ibtca_wqe_le16(x)	cpu_to_le16(x)
#define ibtca_wqe_le32(x)	cpu_to_le32(x)
#define ibtca_wqe_le64(x)	cpu_to_le64(x)
#define ibtca_wqe_be32_num(x)	be32_to_cpu(x)
#else
#include <endian.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#define ibtca_wqe_le16(x)	htole16(x)
#define ibtca_wqe_le32(x)	htole32(x)
#define ibtca_wqe_le64(x)	htole64(x)
#define ibtca_wqe_be32_num(x)	be32toh(x)
#endif

#include <rdma/ib_user_verbs.h>

#include "ibtca_abi.h"

/*
 * The device's opcode (IBTCA_WR_*) for uverbs opcode @op, or -1 for one
 * neither side posts this way (each adds its own: the kernel REG_MR, the
 * provider BIND_MW).
 */
static inline int ibtca_wqe_opcode(unsigned int op)
{
	switch (op) {
	case IB_UVERBS_WR_SEND:
		return IBTCA_WR_SEND;
	case IB_UVERBS_WR_SEND_WITH_IMM:
		return IBTCA_WR_SEND_IMM;
	case IB_UVERBS_WR_RDMA_WRITE:
		return IBTCA_WR_RDMA_WRITE;
	case IB_UVERBS_WR_RDMA_WRITE_WITH_IMM:
		return IBTCA_WR_RDMA_WRITE_IMM;
	case IB_UVERBS_WR_RDMA_READ:
		return IBTCA_WR_RDMA_READ;
	case IB_UVERBS_WR_ATOMIC_CMP_AND_SWP:
		return IBTCA_WR_ATOMIC_CMP_SWP;
	case IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD:
		return IBTCA_WR_ATOMIC_FETCH_ADD;
	case IB_UVERBS_WR_LOCAL_INV:
		return IBTCA_WR_LOCAL_INV;
	case IB_UVERBS_WR_SEND_WITH_INV:
		return IBTCA_WR_SEND_INV;
	default:
		return -1;
	}
}

/* Whether the device's @op carries its payload inline: SEND and WRITE kinds. */
static inline bool ibtca_wqe_inline_op(int op)
{
	return op == IBTCA_WR_SEND || op == IBTCA_WR_SEND_IMM ||
	       op == IBTCA_WR_SEND_INV || op == IBTCA_WR_RDMA_WRITE ||
	       op == IBTCA_WR_RDMA_WRITE_IMM;
}

/*
 * Whether the device's @op takes @num_sge buffers, the first @first_len
 * bytes long: an atomic returns the old value into exactly one 8-byte SGE,
 * LOCAL_INV names none. With @inl, the @inl_len bytes of all buffers are
 * sent inline: a SEND or WRITE kind within IBTCA_MAX_INLINE_DATA.
 */
static inline bool ibtca_wqe_buffers_ok(int op, int num_sge, __u32 first_len,
					bool inl, __u64 inl_len)
{
	if ((op == IBTCA_WR_ATOMIC_CMP_SWP || op == IBTCA_WR_ATOMIC_FETCH_ADD) &&
	    (num_sge != 1 || first_len != sizeof(__u64)))
		return false;
	if (op == IBTCA_WR_LOCAL_INV && num_sge)
		return false;
	return !inl ||
	       (ibtca_wqe_inline_op(op) && inl_len <= IBTCA_MAX_INLINE_DATA);
}

/* Starts send WQE @w (zeroed): every one asks for a completion. */
static inline void ibtca_wqe_start(struct ibtca_send_wqe *w, __u8 opcode,
				   bool solicited, bool fence, bool inl)
{
	w->opcode = opcode;
	w->flags = IBTCA_WQE_F_SIGNALED;
	if (solicited)
		w->flags |= IBTCA_WQE_F_SOLICITED;
	if (fence)
		w->flags |= IBTCA_WQE_F_FENCE;
	if (inl)
		w->flags |= IBTCA_WQE_F_INLINE;
}

/* The immediate data of a work request: the wire's big-endian value, kept as a number. */
static inline __le32 ibtca_wqe_imm(__be32 imm)
{
	return ibtca_wqe_le32(ibtca_wqe_be32_num(imm));
}

/* The remote end of an RDMA WRITE or READ. */
static inline void ibtca_wqe_rdma(struct ibtca_send_wqe *w, __u64 remote_addr,
				  __u32 rkey)
{
	w->remote_addr = ibtca_wqe_le64(remote_addr);
	w->rkey = ibtca_wqe_le32(rkey);
}

/* The remote end and operands of an atomic. */
static inline void ibtca_wqe_atomic(struct ibtca_send_wqe *w, __u64 remote_addr,
				    __u32 rkey, __u64 compare_add, __u64 swap)
{
	ibtca_wqe_rdma(w, remote_addr, rkey);
	w->compare_add = ibtca_wqe_le64(compare_add);
	w->swap = ibtca_wqe_le64(swap);
}

static inline void ibtca_sge_set(struct ibtca_sge *sge, __u64 addr,
				 __u32 length, __u32 lkey)
{
	sge->addr = ibtca_wqe_le64(addr);
	sge->length = ibtca_wqe_le32(length);
	sge->lkey = ibtca_wqe_le32(lkey);
}

/* SGEs within a 128-byte send or receive WQE (the default stride). */
#define IBTCA_WQE_SGES	4

/*
 * SGE @i of the send, UD send or receive WQE at @w: past the first
 * IBTCA_WQE_SGES the list runs on after the 128-byte struct, in a slot of
 * a larger stride.
 */
static inline struct ibtca_sge *ibtca_wqe_sge(void *w, unsigned int i)
{
	return (struct ibtca_sge *)((char *)w +
		__builtin_offsetof(struct ibtca_send_wqe, sge)) + i;
}

/*
 * Adds one buffer to send WQE @w: with IBTCA_WQE_F_INLINE its bytes (at
 * @addr, an address the caller may read; checked by
 * ibtca_wqe_buffers_ok()) after the inline data so far, else the next SGE
 * (the caller keeps within what its stride holds:
 * ibtca_send_stride_sges()).
 */
static inline void ibtca_wqe_gather(struct ibtca_send_wqe *w, __u64 addr,
				    __u32 length, __u32 lkey)
{
	if (w->flags & IBTCA_WQE_F_INLINE) {
		memcpy((__u8 *)w->sge + w->inline_len,
		       (const void *)(uintptr_t)addr, length);
		w->inline_len += length;
		return;
	}
	ibtca_sge_set(ibtca_wqe_sge(w, w->num_sge++), addr, length, lkey);
}

/* Starts UD send WQE @w (zeroed but for its address vector). */
static inline void ibtca_wqe_ud_start(struct ibtca_ud_send_wqe *w, bool imm,
				      __be32 imm_data, bool solicited,
				      __u32 remote_qpn, __u32 remote_qkey)
{
	w->opcode = imm ? IBTCA_WR_UD_SEND_IMM : IBTCA_WR_UD_SEND;
	w->flags = IBTCA_WQE_F_SIGNALED;
	if (solicited)
		w->flags |= IBTCA_WQE_F_SOLICITED;
	if (imm)
		w->imm_data = ibtca_wqe_imm(imm_data);
	w->dest_qpn = ibtca_wqe_le32(remote_qpn);
	w->qkey = ibtca_wqe_le32(remote_qkey);
}

/* Adds one buffer to UD send WQE @w. */
static inline void ibtca_wqe_ud_gather(struct ibtca_ud_send_wqe *w,
				       __u64 addr, __u32 length, __u32 lkey)
{
	ibtca_sge_set(ibtca_wqe_sge(w, w->num_sge++), addr, length, lkey);
}

/* Starts receive WQE @w (zeroed). */
static inline void ibtca_recv_wqe_start(struct ibtca_recv_wqe *w, __u64 wr_id)
{
	w->wr_id = ibtca_wqe_le64(wr_id);
}

/*
 * Adds one buffer to receive WQE @w. Past its first 4 SGEs a WQE of a
 * larger stride runs its list on after the 128-byte struct; the caller
 * keeps within what the stride holds (ibtca_recv_stride_sges()).
 */
static inline void ibtca_recv_wqe_gather(struct ibtca_recv_wqe *w,
					 __u64 addr, __u32 length, __u32 lkey)
{
	ibtca_sge_set(ibtca_wqe_sge(w, w->num_sge++), addr, length, lkey);
}

/*
 * The SGEs a WQE stride of 2^@log_stride bytes holds, at most @cap: send
 * and receive WQEs both have their list at byte 64.
 */
static inline __u32 ibtca_stride_sges(__u32 log_stride, __u32 cap)
{
	__u32 n = ((1U << log_stride) -
		   __builtin_offsetof(struct ibtca_send_wqe, sge)) /
		  sizeof(struct ibtca_sge);

	return n < cap ? n : cap;
}

/*
 * The smallest stride (log2 bytes) holding @sges SGEs of at most @cap, at
 * least IBTCA_RECV_LOG_STRIDE (128 bytes); 0 past @cap.
 */
static inline __u32 ibtca_log_stride(__u32 sges, __u32 cap)
{
	__u32 log;

	for (log = IBTCA_RECV_LOG_STRIDE; log <= IBTCA_MAX_RECV_LOG_STRIDE;
	     log++)
		if (ibtca_stride_sges(log, cap) >= sges)
			return log;
	return 0;
}

/* The SGEs a send WQE stride of 2^@log_stride bytes holds. */
static inline __u32 ibtca_send_stride_sges(__u32 log_stride)
{
	return ibtca_stride_sges(log_stride, IBTCA_MAX_SEND_SGE);
}

/* The smallest send stride holding @sges SGEs; 0 past IBTCA_MAX_SEND_SGE. */
static inline __u32 ibtca_send_log_stride(__u32 sges)
{
	return ibtca_log_stride(sges, IBTCA_MAX_SEND_SGE);
}

/* The SGEs a receive WQE stride of 2^@log_stride bytes holds. */
static inline __u32 ibtca_recv_stride_sges(__u32 log_stride)
{
	return ibtca_stride_sges(log_stride, IBTCA_MAX_RECV_SGE);
}

/* The smallest receive stride holding @sges SGEs; 0 past IBTCA_MAX_RECV_SGE. */
static inline __u32 ibtca_recv_log_stride(__u32 sges)
{
	return ibtca_log_stride(sges, IBTCA_MAX_RECV_SGE);
}

#endif
