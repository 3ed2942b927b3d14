/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * What the direct verbs' guest programs (ibtcadv-test, ibtcadv-bench)
 * share: opening ibtca0, the TCP connection over which the two guests
 * exchange LID, QP number, address and R_Key, and an RC QP's way to RTS
 * towards its peer.
 */
#ifndef IBTCADV_PEER_H
#define IBTCADV_PEER_H

#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <infiniband/verbs.h>

/* How many times a client tries to reach its server, a second apart. */
#define IBTCADV_CONNECT_TRIES 180

static inline struct ibv_context *open_ibtca0(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	int i;

	for (i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "ibtca0"))
			ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	return ctx;
}

/*
 * A connected TCP socket on @port: to @host (tried every second), or with
 * @host NULL the first client accepted. -1 on failure.
 */
static inline int tcp(const char *host, const char *port)
{
	struct addrinfo hints = { .ai_family = AF_INET,
				  .ai_socktype = SOCK_STREAM,
				  .ai_flags = host ? 0 : AI_PASSIVE }, *ai;
	int s, c, one = 1, i;

	for (i = 0; i < (host ? IBTCADV_CONNECT_TRIES : 1); i++) {
		if (getaddrinfo(host, port, &hints, &ai)) {
			sleep(1);
			continue;
		}
		s = socket(ai->ai_family, ai->ai_socktype, 0);
		if (!host) {
			setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
			c = bind(s, ai->ai_addr, ai->ai_addrlen) || listen(s, 1) ?
			    -1 : accept(s, NULL, NULL);
			freeaddrinfo(ai);
			close(s);
			return c;
		}
		if (!connect(s, ai->ai_addr, ai->ai_addrlen)) {
			freeaddrinfo(ai);
			return s;
		}
		freeaddrinfo(ai);
		close(s);
		sleep(1);
	}
	return -1;
}

/* What a QP needs of its peer. */
struct peer {
	unsigned int lid, qpn, rkey;
	unsigned long long addr;
};

/*
 * Sends this end's @lid, @qp's number, @mem's address and @rkey as one line
 * on socket @s and reads the peer's into @p. 0, or -1.
 */
static inline int peer_exchange(int s, uint16_t lid, const struct ibv_qp *qp,
				const void *mem, uint32_t rkey, struct peer *p)
{
	char line[128];
	ssize_t n;
	int len;

	len = snprintf(line, sizeof(line), "%u %u %llu %u\n", lid, qp->qp_num,
		       (unsigned long long)(uintptr_t)mem, rkey);
	if (write(s, line, len) != len)
		return -1;
	n = read(s, line, sizeof(line) - 1);
	if (n <= 0)
		return -1;
	line[n] = 0;
	return sscanf(line, "%u %u %llu %u", &p->lid, &p->qpn, &p->addr,
		      &p->rkey) == 4 ? 0 : -1;
}

/*
 * INIT, RTR and RTS of RC QP @qp towards @p (PSNs 0): remote writes and
 * reads allowed, path MTU @mtu, @rd_atom READs in flight each way. NULL,
 * or the name of the state the QP did not reach.
 */
static inline const char *peer_connect_qp(struct ibv_qp *qp,
					  const struct peer *p,
					  enum ibv_mtu mtu, int rd_atom)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ,
	};

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return "INIT";
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = mtu;
	a.dest_qp_num = p->qpn;
	a.max_dest_rd_atomic = rd_atom;
	a.min_rnr_timer = 12;
	a.ah_attr.dlid = p->lid;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return "RTR";
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = rd_atom;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
			  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		return "RTS";
	return NULL;
}

#endif /* IBTCADV_PEER_H */
