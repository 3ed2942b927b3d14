// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The data path makes no system call (issue 21: "no system call per post
 * or poll"). Loopback on one device, a thread of its own runs SENDs into
 * posted receives and RDMA WRITEs through ibv_post_recv, ibv_post_send
 * and ibv_poll_cq under a seccomp filter that traps every system call but
 * exit and rt_sigreturn (SECCOMP_RET_TRAP: the call is not made, SIGSYS
 * records its number). A getppid() first shows that the trap catches a
 * call; then the round trips must trap none. The thread ends with a raw
 * exit (its glibc exit path would make calls the filter refuses).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "provider_test.h"

#define BYPASS_ROUNDS 500
#define BYPASS_LEN 64
#define BYPASS_SEEN 8
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Shared with the SIGSYS handler and the main thread: relaxed atomics. */
#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

/* What the SIGSYS handler saw: how many calls, the first numbers. */
static int trapped;
static int trapped_nr[BYPASS_SEEN];

static void on_sigsys(int sig, siginfo_t *info, void *uc)
{
	(void)sig;
	(void)uc;
	int n = LOAD(trapped);

	if (n < BYPASS_SEEN)
		STORE(trapped_nr[n], info->si_syscall);
	STORE(trapped, n + 1);
}

struct bypass {
	struct ibv_qp *a, *b;
	struct ibv_cq *cq;
	struct ibv_mr *ms, *md;
	unsigned char *src, *dst;
	int stop;		/* set by the main thread on timeout */
	/* results */
	int filter_err, control_trapped, control_nr;
	int rounds, failed_status, post_err, loop_trapped;
};

/* The next completion on @c->cq, busy-polled (no sleep: that is a call). */
static int bypass_wc(struct bypass *c)
{
	struct ibv_wc wc;
	int n;

	while (!LOAD(c->stop)) {
		n = ibv_poll_cq(c->cq, 1, &wc);
		if (n < 0)
			return -1;
		if (n == 1)
			return wc.status;
	}
	return -2;
}

static int bypass_install(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_exit, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_rt_sigreturn, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {
		.len = ARRAY_SIZE(f), .filter = f,
	};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return errno;
	/* This thread only (no SECCOMP_FILTER_FLAG_TSYNC). */
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0))
		return errno;
	return 0;
}

static void *bypass_thread(void *arg)
{
	struct bypass *c = arg;
	struct ibv_sge ss = { .length = BYPASS_LEN, .lkey = c->ms->lkey };
	struct ibv_sge rs = { .length = BYPASS_LEN, .lkey = c->md->lkey };
	struct ibv_send_wr sw = { .sg_list = &ss, .num_sge = 1,
				  .send_flags = IBV_SEND_SIGNALED }, *bs;
	struct ibv_recv_wr rw = { .sg_list = &rs, .num_sge = 1 }, *br;
	int i, k, st;

	c->filter_err = bypass_install();
	if (c->filter_err)
		syscall(SYS_exit, 0);
	STORE(trapped, 0);
	syscall(SYS_getppid);
	c->control_trapped = LOAD(trapped);
	c->control_nr = LOAD(trapped_nr[0]);
	STORE(trapped, 0);
	for (i = 0; i < BYPASS_ROUNDS && !LOAD(c->stop); i++) {
		c->src[0] = (unsigned char)i;
		ss.addr = (uintptr_t)c->src;
		if (i % 2 == 0) {	/* a SEND into a posted receive */
			rs.addr = (uintptr_t)c->dst + 1024;
			sw.opcode = IBV_WR_SEND;
			c->post_err = ibv_post_recv(c->b, &rw, &br);
			if (c->post_err)
				break;
		} else {		/* an RDMA WRITE */
			sw.opcode = IBV_WR_RDMA_WRITE;
			sw.wr.rdma.remote_addr = (uintptr_t)c->dst;
			sw.wr.rdma.rkey = c->md->rkey;
		}
		c->post_err = ibv_post_send(c->a, &sw, &bs);
		if (c->post_err)
			break;
		for (k = 0; k < (i % 2 == 0 ? 2 : 1); k++) {
			st = bypass_wc(c);
			if (st != IBV_WC_SUCCESS) {
				c->failed_status = st;
				goto done;
			}
		}
		if (c->dst[i % 2 == 0 ? 1024 : 0] != (unsigned char)i) {
			c->failed_status = -3;
			break;
		}
		c->rounds++;
	}
done:
	c->loop_trapped = LOAD(trapped);
	syscall(SYS_exit, 0);
	return NULL;
}

void bypass_tests(struct ibv_context *ctx, struct ibv_pd *pd)
{
	static unsigned char src[4096], dst[4096];
	struct ibv_qp_init_attr init = {
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct sigaction sa = { .sa_sigaction = on_sigsys,
				.sa_flags = SA_SIGINFO }, old;
	struct bypass c = { .src = src, .dst = dst };
	struct ibv_port_attr port;
	struct timespec until;
	pthread_t t;
	int err, i;

	c.cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!c.cq || ibv_query_port(ctx, 1, &port)) {
		step("bypass_setup", 0, "cq or port: %s", strerror(errno));
		goto out;
	}
	init.send_cq = c.cq;
	init.recv_cq = c.cq;
	c.a = ibv_create_qp(pd, &init);
	c.b = ibv_create_qp(pd, &init);
	c.ms = ibv_reg_mr(pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	c.md = ibv_reg_mr(pd, dst, sizeof(dst),
			  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!c.a || !c.b || !c.ms || !c.md ||
	    rc_connect(c.a, c.b->qp_num, port.lid) ||
	    rc_connect(c.b, c.a->qp_num, port.lid)) {
		step("bypass_setup", 0, "qps, regions or connect: %s",
		     strerror(errno));
		goto out;
	}
	for (i = 0; i < BYPASS_LEN; i++)
		src[i] = (unsigned char)(0x5a ^ i);
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSYS, &sa, &old)) {
		step("bypass_setup", 0, "sigaction: %s", strerror(errno));
		goto out;
	}
	err = pthread_create(&t, NULL, bypass_thread, &c);
	if (err) {
		step("bypass_setup", 0, "pthread_create: %s", strerror(err));
		sigaction(SIGSYS, &old, NULL);
		goto out;
	}
	/* Generous: a TCG guest on a busy host. */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 120;
	if (pthread_timedjoin_np(t, NULL, &until)) {
		STORE(c.stop, 1);
		pthread_join(t, NULL);
	}
	sigaction(SIGSYS, &old, NULL);
	step("bypass_no_syscalls", !c.filter_err && c.control_trapped == 1 &&
	     c.control_nr == SYS_getppid && c.rounds == BYPASS_ROUNDS &&
	     c.loop_trapped == 0,
	     "filter=%d control getppid trapped=%d nr=%d; %d of %d round trips (SEND+RECV, WRITE alternately, post_err=%d status=%d): %d system calls (first nr %d)",
	     c.filter_err, c.control_trapped, c.control_nr, c.rounds,
	     BYPASS_ROUNDS, c.post_err, c.failed_status, c.loop_trapped,
	     c.loop_trapped ? LOAD(trapped_nr[0]) : -1);
out:
	close_objects(c.a, c.b, c.ms, c.md, c.cq, NULL);
}
