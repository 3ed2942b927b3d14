// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca_kverbs_lib: helpers of the kernel verbs test modules
 * (ibtca_kverbs_test.ko, ibtca_kverbs_srq.ko), which load after it: an
 * ib_client that finds the ibtca RDMA device, PASS/FAIL lines, and QP
 * connection. See ibtca_kverbs_lib.h.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <rdma/ib_verbs.h>

#include "ibtca_kverbs_lib.h"

#define KVL_PORT	1

static struct ib_device *kvl_dev;

bool kvl_check(struct kvl_tally *t, bool ok, const char *name,
	       const char *fmt, ...)
{
	struct va_format vaf;
	va_list args;

	va_start(args, fmt);
	vaf.fmt = fmt;
	vaf.va = &args;
	pr_info("%s %s %s %pV\n", t->tag, name, ok ? "PASS" : "FAIL", &vaf);
	va_end(args);
	if (ok)
		t->passed++;
	else
		t->failed++;
	return ok;
}
EXPORT_SYMBOL_GPL(kvl_check);

int kvl_connect(struct ib_qp *qp, const struct kvl_path *p)
{
	struct ib_qp_attr a = { .qp_state = IB_QPS_RESET };
	int ret;

	ret = ib_modify_qp(qp, &a, IB_QP_STATE);
	if (ret)
		return ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = KVL_PORT;
	a.qp_access_flags = p->access;
	ret = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_PKEY_INDEX |
			   IB_QP_PORT | IB_QP_ACCESS_FLAGS);
	if (ret)
		return ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_RTR;
	a.path_mtu = IB_MTU_1024;
	a.dest_qp_num = p->dest_qpn;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = p->rd_atomic;
	a.min_rnr_timer = 12;
	a.ah_attr.type = RDMA_AH_ATTR_TYPE_IB;
	rdma_ah_set_dlid(&a.ah_attr, p->dlid);
	rdma_ah_set_port_num(&a.ah_attr, KVL_PORT);
	rdma_ah_set_sl(&a.ah_attr, 0);
	ret = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU |
			   IB_QP_DEST_QPN | IB_QP_RQ_PSN |
			   IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_MIN_RNR_TIMER);
	if (ret)
		return ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_RTS;
	a.sq_psn = 0;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = p->rd_atomic;
	return ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_SQ_PSN |
			    IB_QP_TIMEOUT | IB_QP_RETRY_CNT |
			    IB_QP_RNR_RETRY | IB_QP_MAX_QP_RD_ATOMIC);
}
EXPORT_SYMBOL_GPL(kvl_connect);

struct ib_device *kvl_device(void)
{
	return kvl_dev;
}
EXPORT_SYMBOL_GPL(kvl_device);

static int kvl_add(struct ib_device *dev)
{
	if (!kvl_dev && !strncmp(dev_name(&dev->dev), "ibtca", 5))
		kvl_dev = dev;
	return 0;
}

static void kvl_remove(struct ib_device *dev, void *data)
{
	if (dev == kvl_dev)
		kvl_dev = NULL;
}

static struct ib_client kvl_client = {
	.name = "ibtca_kverbs_lib",
	.add = kvl_add,
	.remove = kvl_remove,
};

static int __init kvl_init(void)
{
	return ib_register_client(&kvl_client);
}

static void __exit kvl_exit(void)
{
	ib_unregister_client(&kvl_client);
}

module_init(kvl_init);
module_exit(kvl_exit);

MODULE_DESCRIPTION("ibtca kernel verbs tests: shared helpers");
MODULE_AUTHOR("ibtca project");
MODULE_LICENSE("GPL");
