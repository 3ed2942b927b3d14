/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * What the direct verbs' guest programs (ibtcadv-test, ibtcadv-bench)
 * share: opening ibtca0, and the TCP connection over which the two
 * guests exchange LID, QP number, address and R_Key.
 */
#ifndef IBTCADV_PEER_H
#define IBTCADV_PEER_H

#include <netdb.h>
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

#endif /* IBTCADV_PEER_H */
