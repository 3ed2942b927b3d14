// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ibtca-provider-test: opens an ibtca device through libibverbs and the
 * ibtca provider and exercises the verbs the provider has: query_device,
 * query_port, alloc_pd/dealloc_pd, reg_mr/dereg_mr (whatever the kernel
 * answers), and checks that a data-path verb it lacks fails with
 * EOPNOTSUPP. One IBTCA-PROVIDER line per step; exit status 0 if every
 * step behaved.
 *
 *   ibtca-provider-test [DEVICE [COMMAND]]
 *
 * DEVICE defaults to ibtca0; COMMAND (run with system(3)) runs while the
 * protection domains are held, e.g. "rdma resource show pd".
 */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

static int failures;

static void step(const char *name, int ok, const char *fmt, ...)
{
	va_list ap;

	printf("IBTCA-PROVIDER %s %s ", name, ok ? "PASS" : "FAIL");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	if (!ok)
		failures++;
}

static struct ibv_context *open_named(const char *name)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	int i, n;

	list = ibv_get_device_list(&n);
	if (!list) {
		step("open", 0, "ibv_get_device_list: %s", strerror(errno));
		return NULL;
	}
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			break;
	if (i == n) {
		step("open", 0, "no device %s among %d", name, n);
	} else {
		ctx = ibv_open_device(list[i]);
		step("open", !!ctx, "%s node_guid=%016" PRIx64 " %s", name,
		     be64toh(ibv_get_device_guid(list[i])),
		     ctx ? "opened" : strerror(errno));
	}
	ibv_free_device_list(list);
	return ctx;
}

static void queries(struct ibv_context *ctx)
{
	struct ibv_device_attr_ex dev;
	struct ibv_port_attr port;
	int err;

	err = ibv_query_device_ex(ctx, NULL, &dev);
	step("query_device", !err,
	     "fw=%s vendor=0x%x part=0x%x max_qp=%d max_qp_wr=%d max_cq=%d max_cqe=%d max_mr=%d max_pd=%d max_sge=%d err=%d",
	     err ? "-" : dev.orig_attr.fw_ver, dev.orig_attr.vendor_id,
	     dev.orig_attr.vendor_part_id, dev.orig_attr.max_qp,
	     dev.orig_attr.max_qp_wr, dev.orig_attr.max_cq,
	     dev.orig_attr.max_cqe, dev.orig_attr.max_mr,
	     dev.orig_attr.max_pd, dev.orig_attr.max_sge, err);
	err = ibv_query_port(ctx, 1, &port);
	step("query_port", !err && port.state == IBV_PORT_ACTIVE,
	     "state=%s lid=%u active_mtu=%d link_layer=%u err=%d",
	     ibv_port_state_str(port.state), port.lid, port.active_mtu,
	     port.link_layer, err);
}

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "ibtca0";
	struct ibv_context *ctx;
	struct ibv_pd *pd[2];
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	static char buf[8192];
	int err, i;

	ctx = open_named(name);
	if (!ctx)
		return 1;
	queries(ctx);

	for (i = 0; i < 2; i++) {
		pd[i] = ibv_alloc_pd(ctx);
		step("alloc_pd", !!pd[i], "handle=%d %s", pd[i] ? (int)pd[i]->handle : -1,
		     pd[i] ? "ok" : strerror(errno));
	}
	if (pd[0] && pd[1])
		step("pd_distinct", pd[0]->handle != pd[1]->handle,
		     "handles %u %u", pd[0]->handle, pd[1]->handle);
	if (argc > 2 && pd[0]) {
		fflush(stdout);
		err = system(argv[2]);
		step("held_command", err == 0, "'%s' status=%d", argv[2], err);
	}

	/* User memory regions: whatever the kernel driver answers today. */
	if (pd[0]) {
		mr = ibv_reg_mr(pd[0], buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
		if (mr) {
			step("reg_mr", 1, "lkey=0x%x rkey=0x%x", mr->lkey, mr->rkey);
			err = ibv_dereg_mr(mr);
			step("dereg_mr", !err, "err=%d", err);
		} else {
			step("reg_mr", errno == EOPNOTSUPP, "refused: %s (errno %d)",
			     strerror(errno), errno);
		}
	}

	/* The data path is not in this provider yet. */
	errno = 0;
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	step("create_cq", !cq && errno == EOPNOTSUPP, "%s (errno %d)",
	     cq ? "unexpectedly created" : strerror(errno), errno);
	if (cq)
		ibv_destroy_cq(cq);

	for (i = 0; i < 2; i++) {
		if (!pd[i])
			continue;
		err = ibv_dealloc_pd(pd[i]);
		step("dealloc_pd", !err, "err=%d", err);
	}
	err = ibv_close_device(ctx);
	step("close", !err, "err=%d", err);
	printf("IBTCA-PROVIDER result %d failed\n", failures);
	return failures ? 1 : 0;
}
