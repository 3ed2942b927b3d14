// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca-tool uverbs-mr: user memory registration through the RDMA core's
 * uverbs write() interface (no rdma-core provider needed): a context, a
 * PD, then regions of user memory that reg_user_mr pins and registers in
 * the device's page-list form, and their deregistration. The device checks
 * every page table it is given (4 KiB-aligned pages, exactly as many as the
 * region covers, the table in guest memory), so a region it accepts had a
 * well-formed table. Prints "IBTCA-UVERBS-MR <check> PASS|FAIL ...".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/ib_user_ioctl_verbs.h>
#include <rdma/ib_user_verbs.h>

#include "commands.h"
#include "verbs_lib.h"
#include "ibtca_uverbs_abi.h"

static int um_fd = -1;
static int um_fail;

static void um_check(const char *what, int ok, const char *fmt, ...)
{
	va_list ap;

	printf("IBTCA-UVERBS-MR %s %s ", what, ok ? "PASS" : "FAIL");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	if (!ok)
		um_fail++;
}

/* One legacy uverbs command: header, @cmd, and @resp_len bytes back. */
static int um_write(uint32_t command, void *cmd, size_t cmd_len,
		    size_t resp_len)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		uint8_t body[128];
	} m;
	size_t len = sizeof(m.hdr) + cmd_len;

	if (cmd_len > sizeof(m.body))
		return -EINVAL;
	m.hdr.command = command;
	m.hdr.in_words = len / 4;
	m.hdr.out_words = resp_len / 4;
	memcpy(m.body, cmd, cmd_len);
	return write(um_fd, &m, len) == (ssize_t)len ? 0 : -errno;
}

static int um_reg(uint32_t pd, void *start, uint64_t len, uint64_t va,
		  struct ib_uverbs_reg_mr_resp *r)
{
	struct ib_uverbs_reg_mr c = {
		.response = (uintptr_t)r,
		.start = (uintptr_t)start,
		.length = len,
		.hca_va = va,
		.pd_handle = pd,
		.access_flags = IB_UVERBS_ACCESS_LOCAL_WRITE |
				IB_UVERBS_ACCESS_REMOTE_WRITE |
				IB_UVERBS_ACCESS_REMOTE_READ,
	};

	return um_write(IB_USER_VERBS_CMD_REG_MR, &c, sizeof(c), sizeof(*r));
}

static int um_dereg(uint32_t handle)
{
	struct ib_uverbs_dereg_mr c = { .mr_handle = handle };

	return um_write(IB_USER_VERBS_CMD_DEREG_MR, &c, sizeof(c), 0);
}

int cmd_uverbs_mr(int argc, char **argv)
{
	const char *path = argc > 0 ? argv[0] : "/dev/infiniband/uverbs0";
	/* The core's command and response, then the driver's (its ABI version). */
	struct {
		struct ib_uverbs_get_context_resp core;
		struct ibtca_alloc_ucontext_resp drv;
	} ctx_r = { 0 };
	struct {
		struct ib_uverbs_get_context core;
		struct ibtca_alloc_ucontext_req drv;
	} ctx = {
		.core.response = (uintptr_t)&ctx_r,
		.drv.abi_version = IBTCA_UVERBS_ABI_VERSION,
	};
	struct ib_uverbs_alloc_pd_resp pd_r = { 0 };
	struct ib_uverbs_alloc_pd pd = { .response = (uintptr_t)&pd_r };
	struct ib_uverbs_dealloc_pd dpd = { 0 };
	struct ib_uverbs_reg_mr_resp a = { 0 }, b = { 0 };
	size_t big = 4U << 20;
	uint8_t *buf, *large;
	int ret;

	um_fd = open(path, O_RDWR | O_CLOEXEC);
	um_check("open", um_fd >= 0, "%s: %s", path, strerror(errno));
	if (um_fd < 0)
		return 1;
	ret = um_write(IB_USER_VERBS_CMD_GET_CONTEXT, &ctx, sizeof(ctx),
		       sizeof(ctx_r));
	um_check("context", !ret, "%s", strerror(-ret));
	ret = um_write(IB_USER_VERBS_CMD_ALLOC_PD, &pd, sizeof(pd),
		       sizeof(pd_r));
	um_check("pd", !ret, "%s", strerror(-ret));
	if (um_fail)
		return 1;

	/*
	 * 3 pages starting 0x123 into a page: four 4 KiB blocks, the first
	 * at offset 0x123, addressed at an iova of its own.
	 */
	buf = aligned_alloc(4096, 5 * 4096);
	large = aligned_alloc(4096, big);
	if (!buf || !large)
		return 1;
	memset(buf, 1, 5 * 4096);
	memset(large, 2, big);
	ret = um_reg(pd_r.pd_handle, buf + 0x123, 3 * 4096, 0x70000123, &a);
	um_check("reg_unaligned", !ret && a.rkey == (a.lkey | 1),
		 "%s lkey=%#x rkey=%#x", strerror(-ret), a.lkey, a.rkey);
	ret = um_reg(pd_r.pd_handle, large, big, (uintptr_t)large, &b);
	um_check("reg_4MiB", !ret && b.lkey != a.lkey, "%s lkey=%#x rkey=%#x",
		 strerror(-ret), b.lkey, b.rkey);
	ret = um_dereg(a.mr_handle);
	um_check("dereg_unaligned", !ret, "%s", strerror(-ret));
	ret = um_dereg(b.mr_handle);
	um_check("dereg_4MiB", !ret, "%s", strerror(-ret));
	dpd.pd_handle = pd_r.pd_handle;
	ret = um_write(IB_USER_VERBS_CMD_DEALLOC_PD, &dpd, sizeof(dpd), 0);
	um_check("dealloc_pd", !ret, "%s", strerror(-ret));
	close(um_fd);
	free(buf);
	free(large);
	printf("IBTCA-UVERBS-MR done failed=%d\n", um_fail);
	return um_fail != 0;
}
