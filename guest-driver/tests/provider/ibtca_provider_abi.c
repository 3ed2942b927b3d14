// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The provider's own ABI-mismatch message, triggered without a second
 * build of the module or the provider: this program defines ioctl(2), so
 * libibverbs' calls reach it first (symbol interposition, in this test
 * program only). While a fake kernel ABI version is set, a successful
 * GET_CONTEXT gets that version written over the abi_version that opens
 * the driver's response (UVERBS_ATTR_UHW_OUT), as a kernel driver of
 * another ibtca version would answer. Every other call passes through.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>

#include <infiniband/verbs.h>
#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/rdma_user_ioctl.h>

#include "provider_test.h"

/* The kernel ABI version GET_CONTEXT answers with; 0: the real one. */
static uint32_t fake_kernel_abi;

int ioctl(int fd, unsigned long req, ...)
{
	static int (*real)(int, unsigned long, ...);
	struct ib_uverbs_ioctl_hdr *hdr;
	va_list ap;
	void *arg;
	int ret, i;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (!real)
		real = (int (*)(int, unsigned long, ...))dlsym(RTLD_NEXT, "ioctl");
	if (!real) {
		errno = EINVAL;
		return -1;
	}
	ret = real(fd, req, arg);
	hdr = arg;
	if (ret || !fake_kernel_abi || req != RDMA_VERBS_IOCTL ||
	    hdr->object_id != UVERBS_OBJECT_DEVICE ||
	    hdr->method_id != UVERBS_METHOD_GET_CONTEXT)
		return ret;
	for (i = 0; i < hdr->num_attrs; i++) {
		struct ib_uverbs_attr *a = &hdr->attrs[i];

		if (a->attr_id == UVERBS_ATTR_UHW_OUT && a->len >= 4)
			memcpy((void *)(uintptr_t)a->data, &fake_kernel_abi, 4);
	}
	return ret;
}

void provider_abi_mismatch(struct ibv_device *dev, uint32_t kernel_abi)
{
	struct ibv_context *ctx;

	fprintf(stderr, "IBTCA-PROVIDER-ABI ");
	fflush(stderr);
	fake_kernel_abi = kernel_abi;
	errno = 0;
	ctx = ibv_open_device(dev);
	fake_kernel_abi = 0;
	step("provider_abi_mismatch", !ctx && errno == EPROTO,
	     "kernel answering ABI %u: open %s (errno %d)", kernel_abi,
	     ctx ? "succeeded" : strerror(errno), errno);
	if (ctx)
		ibv_close_device(ctx);
}
