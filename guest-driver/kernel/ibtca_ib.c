// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca: the ib_device the driver registers with the kernel's RDMA core, so
 * `rdma dev`, `rdma link`, /sys/class/infiniband and the core's clients see
 * the device: one port, node type CA, link layer InfiniBand with the
 * capabilities of a native IB port (RDMA_CORE_PORT_IBA_IB).
 *
 * The device reports its identity and limits (QUERY_DEVICE, once at
 * registration) and its port (QUERY_PORT, on every query: the state is
 * live); port changes go out as IB events. PDs and the DMA MR are device
 * objects. Kernel verbs consumers get device CQs (ibtca_ib_cq.c), RC QPs
 * (ibtca_ib_qp.c, ibtca_ib_post.c) and LID address handles (ibtca_ib_ah.c);
 * user and fast-registration regions and windows are in ibtca_ib_mr.c. The
 * MAD layer's QP0 and QP1 are accepted but carry nothing. The user-space
 * data path comes with the next verbs.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/pci.h>
#include <linux/slab.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_verbs.h>

#include "ibtca_ib.h"
#include "ibtca_ib_mr.h"
#include "ibtca_uctx.h"

/* The default subnet prefix of a port's GID (fe80::/64). */
#define IBTCA_GID_PREFIX	0xfe80000000000000ULL
#define IBTCA_MAX_AH		0xffff

/* The device's codes are the core's. */
static_assert(IBTCA_PORT_DOWN == IB_PORT_DOWN);
static_assert(IBTCA_PORT_INIT == IB_PORT_INIT);
static_assert(IBTCA_PORT_ARMED == IB_PORT_ARMED);
static_assert(IBTCA_PORT_ACTIVE == IB_PORT_ACTIVE);
static_assert(IBTCA_MTU_256 == IB_MTU_256);
static_assert(IBTCA_MTU_4096 == IB_MTU_4096);
static_assert(IBTCA_PORT_WIDTH_4X == IB_WIDTH_4X);
static_assert(IBTCA_PORT_SPEED_QDR == IB_SPEED_QDR);
static_assert(IBTCA_PORT_PHYS_POLLING == IB_PORT_PHYS_STATE_POLLING);
static_assert(IBTCA_PORT_PHYS_LINK_UP == IB_PORT_PHYS_STATE_LINK_UP);

/* QUERY_DEVICE or QUERY_PORT; @sel is params byte 0 (the reply wanted). */
static int ibtca_ib_query(struct ibtca_ib *ib, u8 opcode, u8 sel, void *reply,
			  size_t len)
{
	struct ibtca_dev *idev = ib->idev;
	int ret;

	down_read(&idev->hw_sem);
	if (READ_ONCE(idev->dead))
		ret = -ENODEV;
	else
		ret = ibtca_cmd_query_sel(idev, opcode, sel, reply, len);
	up_read(&idev->hw_sem);
	return ret;
}

static int ibtca_ib_query_device(struct ib_device *ibdev,
				 struct ib_device_attr *a,
				 struct ib_udata *udata)
{
	struct ibtca_ib *ib = to_ib(ibdev);
	const struct ibtca_device_attr *d = &ib->attr;
	struct pci_dev *pdev = ib->idev->pdev;
	u32 max_qp = le32_to_cpu(d->max_qp);

	if (udata && (udata->inlen || udata->outlen))
		return -EINVAL;
	memset(a, 0, sizeof(*a));
	a->fw_ver = (u64)(ib->fw >> 16) << 32 | (ib->fw & 0xffff);
	a->sys_image_guid = cpu_to_be64(le64_to_cpu(d->node_guid));
	a->max_mr_size = le64_to_cpu(d->max_mr_size);
	a->page_size_cap = SZ_4K;
	a->vendor_id = pdev->vendor;
	a->vendor_part_id = pdev->device;
	a->hw_ver = pdev->revision;
	a->max_qp = max_qp;
	a->max_qp_wr = le32_to_cpu(d->max_qp_wr);
	/*
	 * Fast registration (alloc_mr, map_mr_sg, IB_WR_REG_MR, LOCAL_INV,
	 * SEND with Invalidate). Type 1 and 2B windows: user space binds
	 * them through the provider (kernel consumers cannot bind windows).
	 */
	a->device_cap_flags = IB_DEVICE_PORT_ACTIVE_EVENT |
			      IB_DEVICE_MEM_MGT_EXTENSIONS |
			      IB_DEVICE_MEM_WINDOW |
			      IB_DEVICE_MEM_WINDOW_TYPE_2B |
			      IB_DEVICE_SRQ_RESIZE;
	a->max_fast_reg_page_list_len = ib->max_mr_pages;
	a->max_send_sge = d->max_sge;
	a->max_recv_sge = ib->max_recv_sge;
	a->max_sge_rd = d->max_sge;
	a->max_cq = le32_to_cpu(d->max_cq);
	a->max_cqe = le32_to_cpu(d->max_cqe);
	/* Regions and windows share the device's key table. */
	a->max_mr = le32_to_cpu(d->max_mr);
	a->max_mw = le32_to_cpu(d->max_mr);
	a->max_pd = le32_to_cpu(d->max_pd);
	a->max_qp_rd_atom = d->max_qp_rd_atom;
	a->max_qp_init_rd_atom = ib->max_qp_init_rd_atom;
	a->max_res_rd_atom = max_qp * d->max_qp_rd_atom;
	a->atomic_cap = le32_to_cpu(d->caps) & IBTCA_DEV_CAP_ATOMIC ?
			IB_ATOMIC_HCA : IB_ATOMIC_NONE;
	a->max_srq = ib->max_srq;
	a->max_srq_wr = ib->max_srq_wr;
	a->max_srq_sge = ib->max_srq_sge;
	a->max_ah = IBTCA_MAX_AH;
	a->max_pkeys = IBTCA_PKEY_TABLE_LEN;
	a->max_mcast_grp = IBTCA_MAX_MCAST_GROUPS;
	a->max_mcast_qp_attach = IBTCA_MAX_MCAST_QPS;
	a->max_total_mcast_qp_attach = IBTCA_MAX_MCAST_GROUPS *
				       IBTCA_MAX_MCAST_QPS;
	a->local_ca_ack_delay = 15;
	if (ib->cq_moderation) {
		a->cq_caps.max_cq_moderation_count = U16_MAX;
		a->cq_caps.max_cq_moderation_period = U16_MAX;
	}
	return 0;
}

static u8 ibtca_ib_vl_num(u8 data_vls)
{
	/* PortInfo VLCap: 1 = VL0, 2 = VL0-1, 3 = VL0-3, 4 = VL0-7, 5 = VL0-14. */
	if (data_vls <= 1)
		return 1;
	if (data_vls <= 2)
		return 2;
	if (data_vls <= 4)
		return 3;
	if (data_vls <= 8)
		return 4;
	return 5;
}

static int ibtca_ib_query_port(struct ib_device *ibdev, u32 port,
			       struct ib_port_attr *attr)
{
	struct ibtca_ib *ib = to_ib(ibdev);
	struct ibtca_port_attr p;
	int ret;

	if (port != IBTCA_IB_PORT)
		return -EINVAL;
	ret = ibtca_ib_query(ib, IBTCA_CMD_QUERY_PORT, 0, &p, sizeof(p));
	if (ret)
		return ret;
	/* The core has zeroed @attr. */
	attr->subnet_prefix = IBTCA_GID_PREFIX;
	attr->state = p.state >= IB_PORT_DOWN && p.state <= IB_PORT_ACTIVE ?
		      p.state : IB_PORT_DOWN;
	attr->max_mtu = p.max_mtu;
	attr->active_mtu = p.active_mtu;
	attr->phys_mtu = ib_mtu_enum_to_int(p.max_mtu);
	attr->gid_tbl_len = 1;
	/* The device agent's PortInfo CapabilityMask: IBA bit positions. */
	attr->port_cap_flags = le32_to_cpu(p.cap_mask);
	attr->max_msg_sz = le32_to_cpu(p.max_msg_sz);
	attr->pkey_tbl_len = IBTCA_PKEY_TABLE_LEN;
	attr->sm_lid = le16_to_cpu(p.sm_lid);
	attr->lid = le16_to_cpu(p.lid);
	attr->lmc = p.lmc;
	attr->max_vl_num = ibtca_ib_vl_num(p.data_vls);
	attr->active_width = p.active_width;
	attr->active_speed = p.active_speed;
	attr->phys_state = p.phys_state;
	return 0;
}

static int ibtca_ib_query_gid(struct ib_device *ibdev, u32 port, int index,
			      union ib_gid *gid)
{
	if (port != IBTCA_IB_PORT || index)
		return -EINVAL;
	gid->global.subnet_prefix = cpu_to_be64(IBTCA_GID_PREFIX);
	gid->global.interface_id = cpu_to_be64(to_ib(ibdev)->port_guid);
	return 0;
}

static int ibtca_ib_get_port_immutable(struct ib_device *ibdev, u32 port,
				       struct ib_port_immutable *imm)
{
	struct ib_port_attr attr;
	int ret;

	ret = ib_query_port(ibdev, port, &attr);
	if (ret)
		return ret;
	imm->pkey_tbl_len = attr.pkey_tbl_len;
	imm->gid_tbl_len = attr.gid_tbl_len;
	imm->core_cap_flags = RDMA_CORE_PORT_IBA_IB;
	imm->max_mad_size = IB_MGMT_MAD_SIZE;
	return 0;
}

static enum rdma_link_layer ibtca_ib_link_layer(struct ib_device *ibdev,
						u32 port)
{
	return IB_LINK_LAYER_INFINIBAND;
}

static int ibtca_ib_modify_port(struct ib_device *ibdev, u32 port, int mask,
				struct ib_port_modify *props)
{
	struct ibtca_ib *ib = to_ib(ibdev);
	struct ibtca_cmd_port_caps p = {
		.set = cpu_to_le32(props->set_port_cap_mask),
		.clear = cpu_to_le32(props->clr_port_cap_mask),
	};
	int ret;

	if (port != IBTCA_IB_PORT)
		return -EINVAL;
	if (mask & IB_PORT_SHUTDOWN)
		return -EOPNOTSUPP;
	mutex_lock(&ib->cap_lock);
	/*
	 * The device's agent shows the bits it lets the host own (IsSM,
	 * IsDeviceManagementSupported).
	 */
	ret = ibtca_ib_cmd(ib, IBTCA_CMD_SET_PORT_CAPS, &p, sizeof(p), NULL,
			   NULL);
	mutex_unlock(&ib->cap_lock);
	return ret;
}

static void ibtca_ib_fw_str(struct ib_device *ibdev, char *str)
{
	u32 fw = to_ib(ibdev)->fw;

	snprintf(str, IB_FW_VERSION_NAME_MAX, "%u.%u", fw >> 16, fw & 0xffff);
}

static int ibtca_ib_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	return ibtca_ib_cmd(to_ib(ibpd->device), IBTCA_CMD_CREATE_PD, NULL, 0,
			    &to_pd(ibpd)->pdn, NULL);
}

static int ibtca_ib_dealloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct ibtca_ib_pd *pd = to_pd(ibpd);
	struct ibtca_cmd_handle p = { .handle = cpu_to_le32(pd->pdn) };
	int ret;

	ret = ibtca_ib_cmd(to_ib(ibpd->device), IBTCA_CMD_DESTROY_PD, &p,
			   sizeof(p), NULL, NULL);
	/* A device that is gone has forgotten the PD already. */
	return ret == -ENODEV ? 0 : ret;
}

/*
 * The DMA MR: a device region over the whole bus address space, where an
 * address is its own guest-physical address (no IOMMU between the guest
 * and the device); the device checks every access against guest memory.
 */
static struct ib_mr *ibtca_ib_get_dma_mr(struct ib_pd *ibpd, int acc)
{
	struct ibtca_ib_mr *mr;
	struct ibtca_cmd_reg_mr p = {
		.pdn = cpu_to_le32(to_pd(ibpd)->pdn),
		.access = cpu_to_le32(ibtca_ib_access(acc)),
		.iova = 0,
		.length = cpu_to_le64(U64_MAX),
		.gpa = 0,
	};
	int ret;

	mr = kzalloc_obj(*mr, GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	ret = ibtca_ib_cmd(to_ib(ibpd->device), IBTCA_CMD_REG_MR, &p,
			   sizeof(p), &mr->ibmr.lkey, &mr->ibmr.rkey);
	if (ret) {
		kfree(mr);
		return ERR_PTR(ret);
	}
	return &mr->ibmr;
}

static const struct ib_device_ops ibtca_ib_ops = {
	.owner = THIS_MODULE,
	.driver_id = RDMA_DRIVER_UNKNOWN,
	.uverbs_abi_ver = IBTCA_UVERBS_ABI_VERSION,

	.alloc_mr = ibtca_ib_alloc_mr,
	.alloc_mw = ibtca_ib_alloc_mw,
	.alloc_pd = ibtca_ib_alloc_pd,
	.alloc_ucontext = ibtca_ib_alloc_ucontext,
	.attach_mcast = ibtca_ib_attach_mcast,
	.create_ah = ibtca_ib_create_ah,
	.create_cq = ibtca_ib_create_cq,
	.create_qp = ibtca_ib_create_qp,
	.create_srq = ibtca_ib_create_srq,
	.dealloc_mw = ibtca_ib_dealloc_mw,
	.dealloc_pd = ibtca_ib_dealloc_pd,
	.dealloc_ucontext = ibtca_ib_dealloc_ucontext,
	.dereg_mr = ibtca_ib_dereg_mr,
	.destroy_ah = ibtca_ib_destroy_ah,
	.destroy_cq = ibtca_ib_destroy_cq,
	.destroy_qp = ibtca_ib_destroy_qp,
	.destroy_srq = ibtca_ib_destroy_srq,
	.detach_mcast = ibtca_ib_detach_mcast,
	.get_dev_fw_str = ibtca_ib_fw_str,
	.get_dma_mr = ibtca_ib_get_dma_mr,
	.get_link_layer = ibtca_ib_link_layer,
	.get_port_immutable = ibtca_ib_get_port_immutable,
	.map_mr_sg = ibtca_ib_map_mr_sg,
	.mmap = ibtca_ib_mmap,
	.mmap_free = ibtca_ib_mmap_free,
	.modify_cq = ibtca_ib_modify_cq,
	.modify_port = ibtca_ib_modify_port,
	.modify_qp = ibtca_ib_modify_qp,
	.modify_srq = ibtca_ib_modify_srq,
	.poll_cq = ibtca_ib_poll_cq,
	.process_mad = ibtca_ib_process_mad,
	.post_recv = ibtca_ib_post_recv,
	.post_send = ibtca_ib_post_send,
	.post_srq_recv = ibtca_ib_post_srq_recv,
	.query_ah = ibtca_ib_query_ah,
	.query_device = ibtca_ib_query_device,
	.query_gid = ibtca_ib_query_gid,
	.query_pkey = ibtca_ib_query_pkey,
	.query_port = ibtca_ib_query_port,
	.query_qp = ibtca_ib_query_qp,
	.query_srq = ibtca_ib_query_srq,
	.reg_user_mr = ibtca_ib_reg_user_mr,
	.req_notify_cq = ibtca_ib_req_notify_cq,

	INIT_RDMA_OBJ_SIZE(ib_ah, ibtca_ib_ah, ibah),
	INIT_RDMA_OBJ_SIZE(ib_cq, ibtca_ib_cq, ibcq),
	INIT_RDMA_OBJ_SIZE(ib_mw, ibtca_ib_mw, ibmw),
	INIT_RDMA_OBJ_SIZE(ib_pd, ibtca_ib_pd, ibpd),
	INIT_RDMA_OBJ_SIZE(ib_qp, ibtca_ib_qp, ibqp),
	INIT_RDMA_OBJ_SIZE(ib_srq, ibtca_ib_srq, ibsrq),
	INIT_RDMA_OBJ_SIZE(ib_ucontext, ibtca_ib_ucontext, ibuc),
};

/* Tells the core's clients of a port change. Called with @ib_lock held. */
static void ibtca_ib_dispatch(struct ibtca_dev *idev, u32 old, u32 state)
{
	struct ib_event ev = { .element.port_num = IBTCA_IB_PORT };

	if (!idev->ib)
		return;
	if (state == IBTCA_PORT_ACTIVE && old == IBTCA_PORT_ACTIVE)
		ev.event = IB_EVENT_LID_CHANGE;
	else if (state == IBTCA_PORT_ACTIVE)
		ev.event = IB_EVENT_PORT_ACTIVE;
	else if (old == IBTCA_PORT_ACTIVE)
		ev.event = IB_EVENT_PORT_ERR;
	else
		return;
	ev.device = &idev->ib->ibdev;
	ib_dispatch_event(&ev);
	dev_info(&idev->pdev->dev, "%s: port event %s\n",
		 dev_name(&ev.device->dev),
		 ev.event == IB_EVENT_PORT_ACTIVE ? "active" :
		 ev.event == IB_EVENT_LID_CHANGE ? "lid change" : "down");
}

/*
 * Registers ibtcaN with the RDMA core once the command queue runs. A
 * failure is logged and leaves /dev/ibtcaN working without it.
 */
void ibtca_ib_register(struct ibtca_dev *idev)
{
	struct device *dev = &idev->pdev->dev;
	struct ibtca_device_attr_ext ext;
	struct ibtca_port_attr port;
	struct ibtca_ib *ib;
	u32 before, after;
	int ret;

	ib = ib_alloc_device(ibtca_ib, ibdev);
	if (!ib) {
		dev_warn(dev, "no memory for the RDMA device\n");
		return;
	}
	ib->idev = idev;
	mutex_init(&ib->cap_lock);
	mutex_init(&ib->srq_lock);
	INIT_LIST_HEAD(&ib->srqs);
	xa_init_flags(&ib->qps, XA_FLAGS_LOCK_IRQ);
	ib->fw = ibtca_rd(idev, IBTCA_REG_VERSION);
	ib->cq_moderation = ibtca_rd(idev, IBTCA_REG_CAPS) &
			    IBTCA_CAP_CQ_MODERATION;
	ret = ibtca_ib_query(ib, IBTCA_CMD_QUERY_DEVICE, 0, &ib->attr,
			     sizeof(ib->attr));
	if (!ret)
		ret = ibtca_ib_query(ib, IBTCA_CMD_QUERY_DEVICE,
				     IBTCA_DEVICE_ATTR_EXT, &ext, sizeof(ext));
	if (!ret)
		ret = ibtca_ib_query(ib, IBTCA_CMD_QUERY_PORT, 0, &port,
				     sizeof(port));
	if (ret) {
		dev_warn(dev, "device query for the RDMA core: %d\n", ret);
		goto out_dealloc;
	}
	ib->max_mr_pages = le32_to_cpu(ext.max_mr_pages);
	ib->max_srq = le32_to_cpu(ext.max_srq);
	ib->max_srq_wr = le32_to_cpu(ext.max_srq_wr);
	ib->max_srq_sge = ext.max_srq_sge;
	/* A device without larger receive strides reports 0 there. */
	ib->max_recv_sge = ext.max_recv_sge ?: ib->attr.max_sge;
	ib->max_qp_init_rd_atom = ext.max_qp_init_rd_atom;
	/* User QPs of a provider that lays out strides take them all. */
	ib->max_send_sge = ib->attr.max_sge;
	ib->port_guid = le64_to_cpu(port.port_guid);
	ib->pkey = le16_to_cpu(port.pkey);
	spin_lock_init(&ib->pkey_lock);
	/* Until the agent's table is read: its default, entry 0 only. */
	ib->pkeys[0] = ib->pkey;
	ibtca_ib_pkeys_read(ib);

	ib->ibdev.node_type = RDMA_NODE_IB_CA;
	ib->ibdev.node_guid = cpu_to_be64(le64_to_cpu(ib->attr.node_guid));
	ib->ibdev.phys_port_cnt = 1;
	ib->ibdev.num_comp_vectors = 1;
	ib->ibdev.dev.parent = dev;
	strscpy(ib->ibdev.node_desc, "ibtca virtual TCA",
		sizeof(ib->ibdev.node_desc));
	ib_set_device_ops(&ib->ibdev, &ibtca_ib_ops);
	/* The core's DIM tunes each polled CQ's moderation (modify_cq). */
	ib->ibdev.use_cq_dim = ib->cq_moderation;
	ib->ibdev.driver_def = ibtca_ib_dv_defs;

	before = READ_ONCE(idev->port_state);
	ret = ib_register_device(&ib->ibdev, "ibtca%d", dev);
	if (ret) {
		dev_warn(dev, "RDMA core registration: %d\n", ret);
		goto out_dealloc;
	}
	mutex_lock(&idev->ib_lock);
	idev->ib = ib;
	/*
	 * A change the port work saw during registration found no device to
	 * tell: tell it now (the core may have read the new state already; a
	 * repeated event only makes it read again).
	 */
	after = READ_ONCE(idev->port_state);
	if (after != before)
		ibtca_ib_dispatch(idev, before, after);
	/* So may a P_Key table change. */
	if (ibtca_ib_pkeys_read(ib))
		ibtca_ib_pkey_dispatch(ib);
	mutex_unlock(&idev->ib_lock);
	dev_info(dev, "RDMA device %s node GUID %016llx\n",
		 dev_name(&ib->ibdev.dev), le64_to_cpu(ib->attr.node_guid));
	return;

out_dealloc:
	mutex_destroy(&ib->cap_lock);
	mutex_destroy(&ib->srq_lock);
	ib_dealloc_device(&ib->ibdev);
}

/* Before the device is reset: the core's clients free their objects. */
void ibtca_ib_unregister(struct ibtca_dev *idev)
{
	struct ibtca_ib *ib;

	mutex_lock(&idev->ib_lock);
	ib = idev->ib;
	idev->ib = NULL;
	mutex_unlock(&idev->ib_lock);
	if (!ib)
		return;
	ib_unregister_device(&ib->ibdev);
	mutex_destroy(&ib->cap_lock);
	mutex_destroy(&ib->srq_lock);
	ib_dealloc_device(&ib->ibdev);
}

/* A port change, from the port work. */
void ibtca_ib_port_event(struct ibtca_dev *idev, u32 old, u32 state)
{
	mutex_lock(&idev->ib_lock);
	ibtca_ib_dispatch(idev, old, state);
	mutex_unlock(&idev->ib_lock);
}
