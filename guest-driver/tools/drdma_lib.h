/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ibtca-tool: what the Direct RDMA scenarios share (drdma.c: the two-guest
 * scenario and drdma-bench; drdma_fan.c: one guest's ranges to two peers).
 */
#ifndef IBTCA_TOOL_DRDMA_LIB_H
#define IBTCA_TOOL_DRDMA_LIB_H

#include "report.h"
#include "verbs_lib.h"

#define DR_LEN		4096U	/* one range */
#define DR_HALF		2048U
#define DR_ALL_MAX	48U	/* ranges at once: below the 64-entry SQ */

/* How long a load may wait for read-response data (us; the device's limit
 * is 10 s): generous, TCG guests and devices share two host CPUs.
 */
#define DR_LOAD_TIMEOUT_US	5000000U

#define DR_ARR_BITS	0x1fU	/* the IBTCA_ARR_* state bits of CTRL */
#define DR_MTU_2048	4U	/* IBTCA_MTU_256 << 3 bytes */

/* Message types of the DRDMA scenarios. */
enum { DR_IO = VB_USER, DR_ERRORS, DR_ALL, DR_STATUS, DR_BOUNCE };

/* The no-PMB fallback scenario: a batch of DR_BOUNCE_N on DR_BOUNCE_PMBS. */
#define DR_BOUNCE_N	8U
#define DR_BOUNCE_PMBS	3U
#define DR_SEED_BOUNCE	0x66	/* transfer k carries pattern DR_SEED_BOUNCE + k */
enum { DR_OP_READ = 1, DR_OP_WRITE = 2 };

struct dr {
	struct vb v;
	struct ibtca_drdma_info info;
	/*
	 * Mapped window: stores and loads go straight to the PMB pages, so
	 * every fill and drain commits its byte count (IBTCA_UAPI_DRDMA_F_COMMIT)
	 * and a drain first waits for PCI Valid.
	 */
	int mapped;
	/* Transfers dr_path_submit() sent through a range, and bounced. */
	uint32_t direct, bounced;
	uint8_t src[DR_LEN], dst[DR_LEN];
};

/*
 * How one transfer moves its bytes (drdma_path.c): through window range
 * @arr, or, when the device had no dedicated PMB free for it (the seed's
 * fallback), through @len bytes at @bounce_off of the registered buffer
 * with an ordinary RDMA WRITE or READ.
 */
struct dr_path {
	uint32_t arr;
	uint32_t dir;		/* IBTCA_UAPI_DRDMA_READ / _WRITE */
	uint32_t len;
	int bounce;
	uint32_t bounce_off;
};

/* Prints one "IBTCA-DRDMA <name> PASS|FAIL <detail>" line. */
void dcheck(const char *name, int ok, const char *fmt, ...);
int dr_ioctl(struct dr *d, unsigned long req, void *arg);
int dr_info(struct dr *d);
int dr_arr(struct dr *d, uint32_t arr, struct ibtca_drdma_arr *a);
/* Submits and returns the ARR's CTRL (or -errno); @pmb < 0: any PMB. */
int dr_submit(struct dr *d, uint32_t arr, uint32_t dir, uint32_t len,
	      int pmb, uint32_t *ctrl);
/* One DRDMA_SUBMIT_MASK (@op SUBMIT) or DRDMA_COMMIT_MASK; *@errors is
 * DRDMA_ERRORS after it.
 */
int dr_mask(struct dr *d, uint32_t op, uint32_t mask, uint32_t dir,
	    uint32_t len, uint32_t *errors);
/* Stores @len bytes of @src + @off at @off in range @arr (commits them
 * in a mapped window).
 */
int dr_fill(struct dr *d, uint32_t arr, uint32_t off, uint32_t len,
	    const uint8_t *src, uint32_t pattern);
/* The same without the commit (DRDMA_COMMIT_MASK follows). */
int dr_fill_nocommit(struct dr *d, uint32_t arr, uint32_t off, uint32_t len,
		     const uint8_t *src, uint32_t pattern);
/* Loads @len bytes at @off of range @arr into @dst + @off. */
int dr_drain(struct dr *d, uint32_t arr, uint32_t off, uint32_t len,
	     uint8_t *dst, uint32_t pattern);
/* Posts a DRDMA WRITE or READ of range @arr to the peer's @iova. */
int dr_post(struct dr *d, uint32_t qpn, uint32_t opcode, uint32_t arr,
	    uint32_t len, uint64_t iova, uint32_t rkey, uint64_t wr_id);
/* The same; with @more the SQ doorbell waits for a later post. */
int dr_post_more(struct dr *d, uint32_t qpn, uint32_t opcode, uint32_t arr,
		 uint32_t len, uint64_t iova, uint32_t rkey, uint64_t wr_id,
		 int more);
/* Waits for the completion of @wr_id on @cqn with opcode @op and @len. */
int dr_complete(struct dr *d, uint32_t cqn, uint64_t wr_id, uint8_t op,
		uint32_t len, char *why, size_t whylen);
/* The same for @n work requests from @wr0 on, in batches. */
int dr_complete_n(struct dr *d, uint32_t cqn, uint64_t wr0, uint32_t n,
		  uint8_t op, uint32_t len, char *why, size_t whylen);
const char *dr_bits(uint32_t ctrl);
uint32_t dr_errors(struct dr *d, uint32_t *last);
int dr_status(struct dr *d, int ok, uint64_t value);
/* The shuffle both sides compute: a permutation of 0..n-1 from @seed. */
void dr_perm(uint32_t *p, uint32_t n, uint32_t seed);
/* How many ranges "all ranges at once" uses. */
uint32_t dr_all_count(uint32_t ranges, uint32_t dedicated);
/* A raw access of @size bytes at @off of the window (drdma_lib.c). */
int dr_raw(struct dr *d, uint64_t off, uint32_t size, int write,
	   uint64_t *value);

/*
 * drdma_path.c: submits range @arr (any dedicated PMB); a refusal for no
 * free PMB falls back to the bounce buffer at @bounce_off (counted in
 * d->bounced, direct ones in d->direct); any other refusal is -EIO.
 */
int dr_path_submit(struct dr *d, uint32_t arr, uint32_t dir, uint32_t len,
		   uint32_t bounce_off, struct dr_path *p);
/* Posts the transfer: WR_DRDMA_WRITE/READ or WR_RDMA_WRITE/READ. */
int dr_path_post(struct dr *d, const struct dr_path *p, uint32_t qpn,
		 uint64_t iova, uint32_t rkey, uint64_t wr_id);
/* The controller's stores of a WRITE: into the range or the bounce buffer. */
int dr_path_store(struct dr *d, const struct dr_path *p, const uint8_t *src);
/*
 * The controller's loads of a READ: from the range (as responses come), or
 * from the bounce buffer (after the READ completed).
 */
int dr_path_load(struct dr *d, const struct dr_path *p, uint8_t *dst);
/* The completion opcode of the transfer (IBTCA_WC_*). */
uint8_t dr_path_wc(const struct dr_path *p);

/* The no-PMB fallback scenario, server side (drdma_bounce.c). */
int dr_bounce(struct dr *d, const struct vb_msg *m);

/* drdma-bench (drdma_bench.c). */
void dr_bench_server(struct dr *d);
void dr_bench_client(struct dr *d);

#endif /* IBTCA_TOOL_DRDMA_LIB_H */
