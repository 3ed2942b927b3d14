// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca: multicast attach and detach of UD QPs. The device keeps the
 * groups (ATTACH_MCAST, DETACH_MCAST) and delivers a datagram to a
 * multicast LID, with a GRH whose DGID is the group's MGID, to every QP
 * attached to the group, the sender's own QPs included. The core checks
 * the QP type, the MGID and the MLID before it calls these; the device
 * checks them again and bounds the groups (IBTCA_MAX_MCAST_GROUPS) and the
 * QPs of one group (IBTCA_MAX_MCAST_QPS). Destroying a QP detaches it.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include "ibtca_ib.h"

static int ibtca_ib_mcast(struct ib_qp *ibqp, u8 opcode, union ib_gid *gid,
			  u16 lid)
{
	struct ibtca_cmd_mcast p = {
		.qpn = cpu_to_le32(to_qp(ibqp)->r.qpn),
		.mlid = cpu_to_le16(lid),
	};

	memcpy(p.mgid, gid->raw, sizeof(p.mgid));
	return ibtca_ib_cmd(to_ib(ibqp->device), opcode, &p, sizeof(p), NULL,
			    NULL);
}

int ibtca_ib_attach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid)
{
	return ibtca_ib_mcast(ibqp, IBTCA_CMD_ATTACH_MCAST, gid, lid);
}

int ibtca_ib_detach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid)
{
	int ret = ibtca_ib_mcast(ibqp, IBTCA_CMD_DETACH_MCAST, gid, lid);

	/* A device that is gone was reset and forgot its groups. */
	return ret == -ENODEV ? 0 : ret;
}
