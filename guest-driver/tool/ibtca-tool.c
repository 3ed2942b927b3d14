// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca-tool: user-space side of the ibtca guest driver.
 *
 *   ibtca-tool [-d /dev/ibtcaN] info
 *   ibtca-tool [-d /dev/ibtcaN] selftest
 *   ibtca-tool [-d /dev/ibtcaN] bench-mmio N
 *   ibtca-tool [-d /dev/ibtcaN] reg read OFF
 *   ibtca-tool [-d /dev/ibtcaN] reg write OFF VAL
 *   ibtca-tool [-d /dev/ibtcaN] irq VECTOR [TIMEOUT_MS]
 *   ibtca-tool [-d /dev/ibtcaN] dma fill|sum LEN [SEED]
 *   ibtca-tool [-d /dev/ibtcaN] dma-fault
 *   ibtca-tool [-d /dev/ibtcaN] verbs --role server|client --peer-lid N
 *              [--sl SL] [--wait SECS]
 *   ibtca-tool [-d /dev/ibtcaN] verbs-bench --role server|client --peer-lid N
 *   ibtca-tool [-d /dev/ibtcaN] drdma --role server|client --peer-lid N
 *   ibtca-tool [-d /dev/ibtcaN] drdma-bench --role server|client --peer-lid N
 *   ibtca-tool [-d /dev/ibtcaN] drdma-fan --role server|client --peer-lid L[,L]
 *                                         [--index I]
 *
 * The drdma scenarios live in drdma.c (drdma, drdma-bench) and drdma_fan.c
 * (drdma-fan); ibtca-tool.h is what the files share, drdma.h what the
 * DRDMA ones share.
 * Built statically for the guest initramfs. Exit status 0 on success, 1 on a
 * failed check, 2 on usage errors.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "ibtca-tool.h"

const char *dev_path = "/dev/ibtca0";

int n_pass, n_fail;

/* Prefix of the check lines of the verbs helpers (vcheck). */
const char *vb_prefix = "IBTCA-VERBS";

void usage(void)
{
	fprintf(stderr,
		"Usage: ibtca-tool [-d DEV] COMMAND\n"
		"  info                 device information\n"
		"  selftest             run all checks (IBTCA-TEST lines)\n"
		"  bench-mmio N         time N register reads and N writes\n"
		"  reg read OFF         read a BAR0 register\n"
		"  reg write OFF VAL    write a BAR0 register\n"
		"  irq VEC [MS]         fire an MSI-X vector and wait for it\n"
		"  dma fill|sum LEN [SEED]  run a DMA self-test command\n"
		"  dma-fault            check that an out-of-RAM DMA faults\n"
		"  port-wait [AFTER [MS]]  wait until more than AFTER port\n"
		"                       changes were seen (IBTCA-PORT line)\n"
		"  verbs --role server|client --peer-lid N [--sl SL]\n"
		"        [--wait SECS]  verbs scenario with a peer guest\n"
		"                       (IBTCA-VERBS lines); --sl: service\n"
		"                       level of the QPs (0-14), --wait: how\n"
		"                       long the server waits for the client\n"
		"  verbs-bench --role server|client --peer-lid N\n"
		"                       perftest-style write_bw and write_lat\n"
		"                       with a peer guest (IBTCA-PERF lines)\n"
		"  drdma --role server|client --peer-lid N\n"
		"                       Direct RDMA window scenario with a peer\n"
		"                       guest (IBTCA-DRDMA lines)\n"
		"  drdma-bench --role server|client --peer-lid N\n"
		"                       DRDMA bandwidth next to memcpy with a\n"
		"                       peer guest (IBTCA-DRDMA-PERF lines)\n"
		"  drdma-fan --role server --peer-lid B,C\n"
		"  drdma-fan --role client --peer-lid A --index 0|1\n"
		"                       all DRDMA ranges at once to two peer\n"
		"                       guests (IBTCA-DRDMA lines)\n"
		"DEV defaults to /dev/ibtca0.\n");
	exit(2);
}

int parse_u32(const char *s, uint32_t *out)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *end || v > 0xffffffffULL) {
		fprintf(stderr, "ibtca-tool: bad number '%s'\n", s);
		return -1;
	}
	*out = (uint32_t)v;
	return 0;
}

int open_dev(void)
{
	int fd = open(dev_path, O_RDWR | O_CLOEXEC);
	int err = errno;

	if (fd < 0) {
		fprintf(stderr, "ibtca-tool: %s: %s\n", dev_path, strerror(err));
		errno = err;
	}
	return fd;
}

static const char *port_name(uint32_t s)
{
	switch (s) {
	case IBTCA_PORT_DOWN:
		return "down";
	case IBTCA_PORT_INIT:
		return "init";
	case IBTCA_PORT_ARMED:
		return "armed";
	case IBTCA_PORT_ACTIVE:
		return "active";
	}
	return "unknown";
}

/* Prints one "<prefix> <name> PASS|FAIL <detail>" line and counts it. */
void vreport(const char *prefix, const char *name, int ok,
	     const char *fmt, va_list ap)
{
	printf("%s %s %s ", prefix, name, ok ? "PASS" : "FAIL");
	vprintf(fmt, ap);
	printf("\n");
	fflush(stdout);
	if (ok)
		n_pass++;
	else
		n_fail++;
}

static void check(const char *name, int ok, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport("IBTCA-TEST", name, ok, fmt, ap);
	va_end(ap);
}

int reg_read(int fd, uint32_t off, uint32_t *val)
{
	struct ibtca_reg r = { .offset = off };

	if (ioctl(fd, IBTCA_IOC_REG_READ, &r) < 0)
		return -errno;
	*val = r.value;
	return 0;
}

int reg_write(int fd, uint32_t off, uint32_t val)
{
	struct ibtca_reg r = { .offset = off, .value = val };

	return ioctl(fd, IBTCA_IOC_REG_WRITE, &r) < 0 ? -errno : 0;
}

static void print_info(const struct ibtca_info *in)
{
	uint32_t i;

	printf("device:      %s (instance %u)\n", dev_path, in->instance);
	printf("pci:         vendor=0x%04x device=0x%04x class=0x%06x revision=0x%02x\n",
	       in->vendor, in->device, in->class_code, in->revision);
	printf("magic:       0x%08x%s\n", in->magic,
	       in->magic == IBTCA_MAGIC_VALUE ? " (IBTC)" : " (BAD)");
	printf("version:     %u.%u\n", in->version >> 16, in->version & 0xffff);
	printf("caps:        0x%08x%s%s\n", in->caps,
	       in->caps & IBTCA_CAP_MSIX ? " msix" : "",
	       in->caps & IBTCA_CAP_DMA_TEST ? " dma-test" : "");
	printf("vectors:     %u allocated, NUM_VECTORS=%u\n", in->vectors,
	       in->num_vectors);
	printf("port_state:  %u (%s)\n", in->port_state, port_name(in->port_state));
	printf("status:      0x%08x%s%s\n", in->status,
	       in->status & IBTCA_STATUS_READY ? " ready" : "",
	       in->status & IBTCA_STATUS_DMA_MAPPED ? " dma-mapped" : "");
	printf("irq_test:    %u raised by device\n", in->irq_test_count);
	printf("errors:      %u rejected accesses\n", in->error_count);
	printf("bar0:        %u bytes\n", in->bar0_len);
	printf("irq_counts: ");
	for (i = 0; i < in->vectors && i < IBTCA_UAPI_MAX_VECTORS; i++)
		printf(" %u:%" PRIu64, i, (uint64_t)in->irq_counts[i]);
	printf("\n");
}

static int cmd_info(void)
{
	struct ibtca_info in;
	int fd = open_dev();

	if (fd < 0)
		return 1;
	memset(&in, 0, sizeof(in));
	if (ioctl(fd, IBTCA_IOC_GET_INFO, &in) < 0) {
		fprintf(stderr, "ibtca-tool: GET_INFO: %s\n", strerror(errno));
		close(fd);
		return 1;
	}
	print_info(&in);
	close(fd);
	return 0;
}

static void test_irq(int fd, const char *name, uint32_t vector, uint32_t nvec)
{
	struct ibtca_irq_test t = { .vector = vector, .timeout_ms = 5000 };

	if (vector >= nvec) {
		check(name, 0, "only %u vectors allocated", nvec);
		return;
	}
	if (ioctl(fd, IBTCA_IOC_IRQ_TEST, &t) < 0) {
		check(name, 0, "ioctl: %s", strerror(errno));
		return;
	}
	if (t.delivered)
		check(name, 1, "vector=%u latency_ns=%" PRIu64, vector,
		      (uint64_t)t.latency_ns);
	else
		check(name, 0, "vector=%u no interrupt within %u ms", vector,
		      t.timeout_ms);
}

static void test_dma(int fd, uint32_t cmd, uint32_t len, uint32_t seed)
{
	struct ibtca_dma_test t = { .cmd = cmd, .len = len, .seed = seed };
	const char *what = cmd == IBTCA_DMA_CMD_FILL ? "fill" : "sum";
	char name[48];

	snprintf(name, sizeof(name), "dma_%s_%u", what, len);
	if (ioctl(fd, IBTCA_IOC_DMA_TEST, &t) < 0) {
		check(name, 0, "ioctl: %s", strerror(errno));
		return;
	}
	if (cmd == IBTCA_DMA_CMD_FILL && t.verify_ok)
		check(name, 1, "len=%u seed=0x%x status=%u", len, seed, t.status);
	else if (cmd == IBTCA_DMA_CMD_FILL)
		check(name, 0, "len=%u seed=0x%x status=%u first_bad=%u", len,
		      seed, t.status, t.bad_offset);
	else
		check(name, t.verify_ok,
		      "len=%u status=%u result=0x%08x expected=0x%08x", len,
		      t.status, t.result, t.expected);
}

static void test_fault(int fd)
{
	struct ibtca_dma_fault f = { 0 };

	if (ioctl(fd, IBTCA_IOC_DMA_FAULT_TEST, &f) < 0) {
		check("dma_fault", 0, "ioctl: %s", strerror(errno));
		return;
	}
	check("dma_fault", f.fault_ok, "addr=0x%" PRIx64 " status=%u (expected %u)",
	      (uint64_t)f.addr, f.status, IBTCA_DMA_ST_FAULT);
}

static const char *const selftest_names[] = {
	"info", "reg_magic", "scratch", "reg_bounds", "irq_vec0", "irq_vec1",
	"dma_fill_4096", "dma_sum_4096", "dma_fill_65536", "dma_sum_65536",
	"dma_fault",
};

static int cmd_selftest(void)
{
	static const uint32_t pat[] = { 0xdeadbeef, 0x12345678, 0 };
	struct ibtca_info in;
	uint32_t val = 0, i;
	int fd, ret, ok;

	fd = open_dev();
	if (fd < 0) {
		int err = errno;

		for (i = 0; i < ARRAY_SIZE(selftest_names); i++)
			check(selftest_names[i], 0, "cannot open %s: %s", dev_path,
			      strerror(err));
		goto out;
	}

	memset(&in, 0, sizeof(in));
	if (ioctl(fd, IBTCA_IOC_GET_INFO, &in) < 0) {
		check("info", 0, "GET_INFO: %s", strerror(errno));
	} else {
		ok = in.vendor == IBTCA_PCI_VENDOR_ID &&
		     in.device == IBTCA_PCI_DEVICE_ID &&
		     in.class_code == IBTCA_PCI_CLASS_CODE &&
		     in.version >> 16 == IBTCA_VERSION_MAJOR && in.vectors >= 1;
		check("info", ok,
		      "vendor=0x%04x device=0x%04x class=0x%06x version=%u.%u vectors=%u port=%s",
		      in.vendor, in.device, in.class_code, in.version >> 16,
		      in.version & 0xffff, in.vectors, port_name(in.port_state));
	}

	ret = reg_read(fd, IBTCA_REG_MAGIC, &val);
	check("reg_magic", !ret && val == IBTCA_MAGIC_VALUE, "value=0x%08x%s%s",
	      val, ret ? " error=" : "", ret ? strerror(-ret) : "");

	ok = 1;
	for (i = 0; i < ARRAY_SIZE(pat) && ok; i++) {
		ret = reg_write(fd, IBTCA_REG_SCRATCH, pat[i]);
		if (!ret)
			ret = reg_read(fd, IBTCA_REG_SCRATCH, &val);
		ok = !ret && val == pat[i];
	}
	if (ok)
		check("scratch", 1, "%u values round-tripped", i);
	else if (ret)
		check("scratch", 0, "ioctl: %s", strerror(-ret));
	else
		check("scratch", 0, "wrote 0x%08x read 0x%08x", pat[i - 1], val);

	ret = reg_read(fd, IBTCA_REGS_BAR_SIZE, &val);
	ok = ret == -EINVAL;
	ret = reg_read(fd, IBTCA_REG_SCRATCH + 2, &val);
	ok = ok && ret == -EINVAL;
	check("reg_bounds", ok, "out-of-BAR and unaligned offsets %s",
	      ok ? "rejected with EINVAL" : "not rejected");

	test_irq(fd, "irq_vec0", 0, in.vectors);
	test_irq(fd, "irq_vec1", 1, in.vectors);
	test_dma(fd, IBTCA_DMA_CMD_FILL, 4096, 0x5a);
	test_dma(fd, IBTCA_DMA_CMD_SUM, 4096, 0x1234567);
	test_dma(fd, IBTCA_DMA_CMD_FILL, 65536, 0xa7);
	test_dma(fd, IBTCA_DMA_CMD_SUM, 65536, 0x89abcdef);
	test_fault(fd);
	close(fd);
out:
	printf("IBTCA-SELFTEST %d passed, %d failed\n", n_pass, n_fail);
	return n_fail || !n_pass;
}

static int cmd_bench(int argc, char **argv)
{
	struct ibtca_bench_mmio b = { 0 };
	int fd;

	if (argc != 1 || parse_u32(argv[0], &b.iterations) || !b.iterations)
		usage();
	fd = open_dev();
	if (fd < 0)
		return 1;
	if (ioctl(fd, IBTCA_IOC_BENCH_MMIO, &b) < 0) {
		fprintf(stderr, "ibtca-tool: BENCH_MMIO: %s\n", strerror(errno));
		close(fd);
		return 1;
	}
	close(fd);
	printf("IBTCA-BENCH mmio_read_ns=%" PRIu64 " mmio_write_ns=%" PRIu64
	       " iterations=%u\n", (uint64_t)b.read_ns / b.iterations,
	       (uint64_t)b.write_ns / b.iterations, b.iterations);
	return 0;
}

static int cmd_reg(int argc, char **argv)
{
	uint32_t off, val;
	int fd, ret;

	if (argc == 2 && !strcmp(argv[0], "read")) {
		if (parse_u32(argv[1], &off))
			usage();
		fd = open_dev();
		if (fd < 0)
			return 1;
		ret = reg_read(fd, off, &val);
		close(fd);
		if (ret) {
			fprintf(stderr, "ibtca-tool: REG_READ 0x%x: %s\n", off,
				strerror(-ret));
			return 1;
		}
		printf("0x%08x\n", val);
		return 0;
	}
	if (argc == 3 && !strcmp(argv[0], "write")) {
		if (parse_u32(argv[1], &off) || parse_u32(argv[2], &val))
			usage();
		fd = open_dev();
		if (fd < 0)
			return 1;
		ret = reg_write(fd, off, val);
		close(fd);
		if (ret) {
			fprintf(stderr, "ibtca-tool: REG_WRITE 0x%x: %s\n", off,
				strerror(-ret));
			return 1;
		}
		return 0;
	}
	usage();
	return 2;
}

static int cmd_irq(int argc, char **argv)
{
	struct ibtca_irq_test t = { .timeout_ms = 5000 };
	int fd;

	if (argc < 1 || argc > 2 || parse_u32(argv[0], &t.vector) ||
	    (argc == 2 && parse_u32(argv[1], &t.timeout_ms)))
		usage();
	fd = open_dev();
	if (fd < 0)
		return 1;
	if (ioctl(fd, IBTCA_IOC_IRQ_TEST, &t) < 0) {
		fprintf(stderr, "ibtca-tool: IRQ_TEST: %s\n", strerror(errno));
		close(fd);
		return 1;
	}
	close(fd);
	printf("vector=%u delivered=%u latency_ns=%" PRIu64 "\n", t.vector,
	       t.delivered, (uint64_t)t.latency_ns);
	return !t.delivered;
}

static int cmd_port_wait(int argc, char **argv)
{
	struct ibtca_port_wait w = { .timeout_ms = 0 };
	int fd, ret;

	if (argc > 2 || (argc >= 1 && parse_u32(argv[0], &w.after)) ||
	    (argc == 2 && parse_u32(argv[1], &w.timeout_ms)))
		usage();
	if (argc == 1)
		w.timeout_ms = 60000;
	fd = open_dev();
	if (fd < 0)
		return 1;
	ret = ioctl(fd, IBTCA_IOC_PORT_WAIT, &w) < 0 ? errno : 0;
	close(fd);
	if (ret == ETIMEDOUT) {
		printf("IBTCA-PORT timeout after=%u\n", w.after);
		return 1;
	}
	if (ret) {
		fprintf(stderr, "ibtca-tool: PORT_WAIT: %s\n", strerror(ret));
		return 1;
	}
	printf("IBTCA-PORT state=%u events=%u\n", w.state, w.events);
	return 0;
}

static int cmd_dma(int argc, char **argv)
{
	struct ibtca_dma_test t = { 0 };
	int fd;

	if (argc < 2 || argc > 3)
		usage();
	if (!strcmp(argv[0], "fill"))
		t.cmd = IBTCA_DMA_CMD_FILL;
	else if (!strcmp(argv[0], "sum"))
		t.cmd = IBTCA_DMA_CMD_SUM;
	else if (parse_u32(argv[0], &t.cmd))
		usage();
	if (parse_u32(argv[1], &t.len) || (argc == 3 && parse_u32(argv[2], &t.seed)))
		usage();
	fd = open_dev();
	if (fd < 0)
		return 1;
	if (ioctl(fd, IBTCA_IOC_DMA_TEST, &t) < 0) {
		fprintf(stderr, "ibtca-tool: DMA_TEST: %s\n", strerror(errno));
		close(fd);
		return 1;
	}
	close(fd);
	printf("cmd=%u len=%u seed=0x%x status=%u result=0x%08x", t.cmd, t.len,
	       t.seed, t.status, t.result);
	printf(" expected=0x%08x verify_ok=%u bad_offset=%u\n", t.expected,
	       t.verify_ok, t.bad_offset);
	return !t.verify_ok;
}

static int cmd_fault(void)
{
	struct ibtca_dma_fault f = { 0 };
	int fd = open_dev();

	if (fd < 0)
		return 1;
	if (ioctl(fd, IBTCA_IOC_DMA_FAULT_TEST, &f) < 0) {
		fprintf(stderr, "ibtca-tool: DMA_FAULT_TEST: %s\n", strerror(errno));
		close(fd);
		return 1;
	}
	close(fd);
	printf("addr=0x%" PRIx64 " status=%u fault_ok=%u\n", (uint64_t)f.addr,
	       f.status, f.fault_ok);
	return !f.fault_ok;
}

/*
 * verbs: two guests, one device each, joined by a link. Both create a PD, an
 * MR over a 2 MiB buffer, CQs and two RC QPs and connect them to the peer's
 * (a fresh device numbers its QPs from 0x400). Buffer addresses and keys
 * travel in SEND messages; the client drives RDMA WRITE, RDMA READ,
 * atomics and a write with a bad R_Key (on the second QP, which the error
 * takes down), the server checks its memory and reports back.
 */
double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

void vcheck(const char *name, int ok, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport(vb_prefix, name, ok, fmt, ap);
	va_end(ap);
}

void vb_pattern(uint8_t *p, size_t len, uint8_t seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 31 + seed + (i >> 12));
}

/* Offset of the first byte that differs from the pattern, or len. */
size_t vb_pattern_diff(const uint8_t *p, size_t len, uint8_t seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != (uint8_t)(i * 31 + seed + (i >> 12)))
			break;
	return i;
}

static int vb_modify(struct vb *v, uint32_t qpn, uint32_t dest_qpn,
		     uint8_t mtu)
{
	uint32_t remote = IBTCA_ACCESS_REMOTE_WRITE | IBTCA_ACCESS_REMOTE_READ |
			  IBTCA_ACCESS_REMOTE_ATOMIC;
	struct ibtca_modify_qp m = {
		.qpn = qpn,
		.attr_mask = IBTCA_QP_ATTR_STATE | IBTCA_QP_ATTR_ACCESS,
		.state = IBTCA_QPS_INIT,
		.access = remote,
	};

	if (ioctl(v->fd, IBTCA_IOC_MODIFY_QP, &m) < 0)
		return -errno;
	memset(&m, 0, sizeof(m));
	m.qpn = qpn;
	m.attr_mask = IBTCA_QP_ATTR_STATE | IBTCA_QP_ATTR_PATH |
		      IBTCA_QP_ATTR_DEST_QPN | IBTCA_QP_ATTR_RQ_PSN;
	m.state = IBTCA_QPS_RTR;
	m.path_mtu = mtu ? mtu : IBTCA_MTU_4096;
	m.dlid = v->peer_lid;
	m.sl = v->sl;
	m.dest_qpn = dest_qpn;
	m.rq_psn = VB_PSN;
	if (ioctl(v->fd, IBTCA_IOC_MODIFY_QP, &m) < 0)
		return -errno;
	memset(&m, 0, sizeof(m));
	m.qpn = qpn;
	m.attr_mask = IBTCA_QP_ATTR_STATE | IBTCA_QP_ATTR_SQ_PSN |
		      IBTCA_QP_ATTR_RETRY;
	m.state = IBTCA_QPS_RTS;
	m.sq_psn = VB_PSN;
	/*
	 * The peer guest may still be booting: packets to a QP that is not
	 * ready are dropped, so give retransmissions a minute (8 tries of
	 * 4.096 us << 21 = 8.6 s). Nothing is lost on the link otherwise.
	 */
	m.timeout = 21;
	m.retry_cnt = 7;
	m.rnr_retry = 7;
	m.min_rnr_timer = 1;
	m.max_rd_atomic = 4;
	if (ioctl(v->fd, IBTCA_IOC_MODIFY_QP, &m) < 0)
		return -errno;
	return 0;
}

static int vb_post_recv(struct vb *v, uint32_t slot)
{
	struct ibtca_post_recv r = {
		.qpn = v->qp,
		.length = VB_SLOT,
		.wr_id = slot,
		.addr = v->iova + VB_RECV_OFF + slot * VB_SLOT,
		.lkey = v->lkey,
	};

	return ioctl(v->fd, IBTCA_IOC_POST_RECV, &r) < 0 ? -errno : 0;
}

/*
 * Waits up to @secs for a completion on @cqn (sleeping in the driver until
 * the CQ interrupt); -ETIMEDOUT if none.
 */
int vb_poll(struct vb *v, uint32_t cqn, struct ibtca_poll_cq *c,
	    double secs)
{
	double end = now_s() + secs;

	for (;;) {
		double left = end - now_s();

		memset(c, 0, sizeof(*c));
		c->cqn = cqn;
		c->timeout_ms = left <= 0 ? 0 : left > 60 ? 60000 :
				(uint32_t)(left * 1000) + 1;
		if (ioctl(v->fd, IBTCA_IOC_POLL_CQ, c) < 0)
			return -errno;
		if (c->found)
			return 0;
		if (left <= 0)
			return -ETIMEDOUT;
	}
}

/* Posts a work request and waits for its completion on @cqn. */
int vb_run(struct vb *v, struct ibtca_post_send *s, uint32_t cqn,
	   struct ibtca_poll_cq *c, double secs)
{
	int ret;

	memset(c, 0, sizeof(*c));
	s->wr_id = ++v->wr_id;
	if (ioctl(v->fd, IBTCA_IOC_POST_SEND, s) < 0)
		return -errno;
	ret = vb_poll(v, cqn, c, secs);
	if (!ret && c->wr_id != s->wr_id)
		return -EPROTO;
	return ret;
}

const char *vb_err(int ret, const struct ibtca_poll_cq *c)
{
	static char msg[96];

	if (ret)
		snprintf(msg, sizeof(msg), "error=%s status=%u", strerror(-ret),
			 c->status);
	else
		snprintf(msg, sizeof(msg), "status=%u opcode=0x%x byte_len=%u",
			 c->status, c->opcode, c->byte_len);
	return msg;
}

/* SENDs @m on the first QP; 0 once it completed successfully. */
int vb_send(struct vb *v, struct vb_msg *m, double secs,
	    struct ibtca_poll_cq *c)
{
	struct ibtca_post_send s = {
		.qpn = v->qp,
		.opcode = IBTCA_WR_SEND,
		.addr = v->iova + VB_SEND_OFF,
		.length = sizeof(*m),
		.lkey = v->lkey,
	};
	int ret;

	m->magic = VB_MAGIC;
	memcpy(v->buf + VB_SEND_OFF, m, sizeof(*m));
	ret = vb_run(v, &s, v->scq, c, secs);
	if (!ret && c->status != IBTCA_WC_SUCCESS)
		ret = -EIO;
	return ret;
}

int vb_send_simple(struct vb *v, uint32_t type, uint32_t ok,
		   uint64_t value)
{
	struct vb_msg m = { .type = type, .ok = ok, .value = value };
	struct ibtca_poll_cq c;
	int ret = vb_send(v, &m, 60, &c);

	if (ret)
		fprintf(stderr, "ibtca-tool: send type %u: %s\n", type,
			vb_err(ret, &c));
	return ret;
}

/* Receives the next message into @m (and reposts its slot). */
int vb_recv(struct vb *v, struct vb_msg *m, double secs)
{
	struct ibtca_poll_cq c;
	int ret = vb_poll(v, v->rcq, &c, secs);

	if (ret)
		return ret;
	if (c.status != IBTCA_WC_SUCCESS || c.wr_id >= VB_NRECV ||
	    c.byte_len != sizeof(*m)) {
		fprintf(stderr, "ibtca-tool: bad receive: wr_id=%llu %s\n",
			(unsigned long long)c.wr_id, vb_err(0, &c));
		return -EIO;
	}
	memcpy(m, v->buf + VB_RECV_OFF + c.wr_id * VB_SLOT, sizeof(*m));
	ret = vb_post_recv(v, (uint32_t)c.wr_id);
	if (ret)
		return ret;
	return m->magic == VB_MAGIC ? 0 : -EBADMSG;
}

/* Receives a message of @type within @secs. */
int vb_expect_within(struct vb *v, uint32_t type, struct vb_msg *m,
		     double secs)
{
	int ret = vb_recv(v, m, secs);

	if (!ret && m->type != type)
		ret = -EPROTO;
	return ret;
}

/* Receives a message of @type. */
int vb_expect(struct vb *v, uint32_t type, struct vb_msg *m)
{
	return vb_expect_within(v, type, m, 120);
}

static int vb_wait_port(struct vb *v)
{
	double end = now_s() + 60;
	uint32_t st = 0;

	while (now_s() < end) {
		if (reg_read(v->fd, IBTCA_REG_PORT_STATE, &st))
			return -EIO;
		if (st == IBTCA_PORT_ACTIVE)
			return 0;
		usleep(10000);
	}
	return -ETIMEDOUT;
}

/* Records why set-up failed; returns -1. */
static int vb_fail(char *err, size_t errlen, const char *what, int ret)
{
	snprintf(err, errlen, "%s: %s", what, strerror(ret < 0 ? -ret : ret));
	return -1;
}

static int vb_ioctl(struct vb *v, unsigned long req, void *arg)
{
	return ioctl(v->fd, req, arg) < 0 ? -errno : 0;
}

static int vb_destroy(struct vb *v, uint32_t type, uint32_t handle)
{
	struct ibtca_destroy d = { .type = type, .handle = handle };

	return vb_ioctl(v, IBTCA_IOC_DESTROY, &d);
}

static int vb_state(struct vb *v, uint32_t qpn, uint8_t state)
{
	struct ibtca_modify_qp m = {
		.qpn = qpn,
		.attr_mask = IBTCA_QP_ATTR_STATE,
		.state = state,
	};

	return vb_ioctl(v, IBTCA_IOC_MODIFY_QP, &m);
}

/*
 * After the scenario: a QP goes back to RESET and is usable again (INIT);
 * the PD cannot go while its MR and QPs exist; then every object is
 * destroyed explicitly, in dependency order (not by closing the file).
 */
static void vb_teardown(struct vb *v)
{
	uint32_t cqs[] = { v->scq, v->rcq, v->scq2 }, qps[] = { v->qp, v->qp2 };
	int ret, busy, i;

	ret = vb_state(v, v->qp, IBTCA_QPS_RESET);
	if (!ret)
		ret = vb_state(v, v->qp, IBTCA_QPS_INIT);
	if (!ret)
		ret = vb_state(v, v->qp, IBTCA_QPS_RESET);
	vcheck("teardown_qp_reset", !ret, "QP %u: RTS -> RESET -> INIT -> RESET: %s",
	       v->qp, strerror(-ret));
	busy = vb_destroy(v, IBTCA_UAPI_OBJ_PD, v->pdn);
	vcheck("teardown_pd_busy", busy == -EBUSY,
	       "DESTROY PD %u with its MR and QPs: %s (want EBUSY)", v->pdn,
	       strerror(-busy));
	ret = 0;
	for (i = 0; i < 2 && !ret; i++)
		ret = vb_destroy(v, IBTCA_UAPI_OBJ_QP, qps[i]);
	for (i = 0; i < 3 && !ret; i++)
		ret = vb_destroy(v, IBTCA_UAPI_OBJ_CQ, cqs[i]);
	if (!ret)
		ret = vb_destroy(v, IBTCA_UAPI_OBJ_MR, v->lkey);
	if (!ret)
		ret = vb_destroy(v, IBTCA_UAPI_OBJ_PD, v->pdn);
	if (!ret)
		ret = vb_destroy(v, IBTCA_UAPI_OBJ_PD, v->pdn) == -ENOENT ?
		      0 : -EEXIST;
	vcheck("teardown", !ret, "2 QPs, 3 CQs, MR, PD destroyed, PD gone: %s",
	       strerror(-ret));
}

int vb_setup(struct vb *v, char *err, size_t errlen)
{
	struct ibtca_alloc_buf b = { .size = VB_BUF_SIZE };
	struct ibtca_create_pd pd = { 0 };
	struct ibtca_reg_mr mr = { 0 };
	struct ibtca_create_cq cq = { .log_entries = 8 };
	struct ibtca_create_qp qp = { .log_entries = 6 };
	uint32_t *cqs[] = { &v->scq, &v->rcq, &v->scq2 };
	uint32_t qpn0 = v->qpn0 ? v->qpn0 : VB_QPN0;
	uint32_t peer0 = v->peer_qpn0 ? v->peer_qpn0 : VB_QPN0;
	uint32_t i;
	int ret;

	ret = vb_wait_port(v);
	if (ret)
		return vb_fail(err, errlen, "port not active", ret);
	ret = vb_ioctl(v, IBTCA_IOC_ALLOC_BUF, &b);
	if (ret)
		return vb_fail(err, errlen, "ALLOC_BUF", ret);
	v->buf = mmap(NULL, b.size, PROT_READ | PROT_WRITE, MAP_SHARED, v->fd,
		      (off_t)b.mmap_offset);
	if (v->buf == MAP_FAILED)
		return vb_fail(err, errlen, "mmap", errno);
	ret = vb_ioctl(v, IBTCA_IOC_CREATE_PD, &pd);
	if (ret)
		return vb_fail(err, errlen, "CREATE_PD", ret);
	v->pdn = pd.pdn;
	mr.buf = b.handle;
	mr.pdn = v->pdn;
	mr.length = VB_BUF_SIZE;
	mr.access = IBTCA_ACCESS_LOCAL_WRITE | IBTCA_ACCESS_REMOTE_WRITE |
		    IBTCA_ACCESS_REMOTE_READ | IBTCA_ACCESS_REMOTE_ATOMIC;
	ret = vb_ioctl(v, IBTCA_IOC_REG_MR, &mr);
	if (ret)
		return vb_fail(err, errlen, "REG_MR", ret);
	v->iova = mr.iova;
	v->lkey = mr.lkey;
	v->rkey = mr.rkey;
	for (i = 0; i < ARRAY_SIZE(cqs); i++) {
		ret = vb_ioctl(v, IBTCA_IOC_CREATE_CQ, &cq);
		if (ret)
			return vb_fail(err, errlen, "CREATE_CQ", ret);
		*cqs[i] = cq.cqn;
	}
	qp.pdn = v->pdn;
	qp.send_cqn = v->scq;
	qp.recv_cqn = v->rcq;
	ret = vb_ioctl(v, IBTCA_IOC_CREATE_QP, &qp);
	if (ret)
		return vb_fail(err, errlen, "CREATE_QP", ret);
	v->qp = qp.qpn;
	/* The second QP (bad R_Key) has its own send CQ. */
	qp.send_cqn = v->scq2;
	ret = vb_ioctl(v, IBTCA_IOC_CREATE_QP, &qp);
	if (ret)
		return vb_fail(err, errlen, "CREATE_QP", ret);
	v->qp2 = qp.qpn;
	if (v->qp != qpn0 || v->qp2 != qpn0 + 1) {
		snprintf(err, errlen, "QP numbers 0x%x 0x%x, expected 0x%x 0x%x",
			 v->qp, v->qp2, qpn0, qpn0 + 1);
		return -1;
	}
	ret = vb_modify(v, v->qp, peer0, v->mtu[0]);
	if (ret)
		return vb_fail(err, errlen, "connect QP 1", ret);
	ret = vb_modify(v, v->qp2, peer0 + 1, v->mtu[1]);
	if (ret)
		return vb_fail(err, errlen, "connect QP 2", ret);
	for (i = 0; i < VB_NRECV; i++) {
		ret = vb_post_recv(v, i);
		if (ret)
			return vb_fail(err, errlen, "POST_RECV", ret);
	}
	snprintf(err, errlen,
		 "qpn=0x%x,0x%x peer_lid=%u iova=0x%llx lkey=0x%x rkey=0x%x",
		 v->qp, v->qp2, v->peer_lid, (unsigned long long)v->iova,
		 v->lkey, v->rkey);
	return 0;
}

/*
 * verbs-bench: perftest-style measurements between the two guests, on the
 * first QP pair set up and introduced as for `verbs`.
 *
 * write_bw (ib_write_bw): the client keeps up to VB_BW_DEPTH RDMA WRITEs of
 * one size outstanding for VB_BW_SECS, polling its send CQ without waiting.
 * Once VB_BW_BATCH have completed it posts as many again with one
 * POST_SEND_BATCH (one SQ doorbell). From VB_BW_EVENT_MIN bytes on, a poll
 * that finds nothing sleeps until the CQ interrupt instead (ib_write_bw -e):
 * a completion is then ~1 ms away, and a spinning TCG vCPU would take that
 * host CPU from the devices that move the data.
 *
 * write_lat (ib_write_lat): 64 B ping-pong by RDMA WRITE. Each side spins
 * on the last 8 bytes of its own incoming slot for the peer's next sequence
 * number and answers with a write of the same number: no CQ on the hot
 * path and no interrupts. Every WR is signaled (the driver has no
 * unsignaled ones), so the send CQ is drained without waiting every
 * VB_LAT_DRAIN writes, outside the timed part.
 *
 * write_lat_sleep: the same ping-pong, but each side looks at its slot for
 * VB_NAP_SPIN_US after its own write, then sleeps VB_NAP_US between looks,
 * so its vCPU halts and the host CPU goes to QEMU and the device (a guest
 * spinning under TCG keeps a host CPU busy). The default timer slack
 * (50 us) is kept: it stretches each nap to up to ~60 us, which leaves the
 * vCPU idle most of the time (each TCG wake-up costs host CPU too).
 */
#define VB_BW_DEPTH	32U
#define VB_BW_BATCH	8U
#define VB_BW_EVENT_MIN	(64U << 10)
#define VB_DRAIN_BATCH	32U
#define VB_NAP_SPIN_US	20.0
#define VB_NAP_US	10U
/* VB_LAT's ok field: how both sides wait for the peer's write. */
#define VB_LAT_SPIN	1U
#define VB_LAT_NAP	2U
#define VB_BW_SECS	2.0
#define VB_LAT_ITERS	1000U
#define VB_LAT_WARMUP	50U
#define VB_LAT_DRAIN	16U
#define VB_LAT_MAX_OUT	48U	/* of the 64-entry SQ */
#define VB_SPIN_SECS	30.0
#define VB_SEQ_OFF	(VB_LAT_LEN - 8)

/*
 * Takes every send completion that is ready, without waiting, in batches
 * (POLL_CQ_BATCH: one CQ doorbell per batch); returns how many (and lowers
 * *@out by that), or -errno, -EIO for a failed WR.
 */
static int vb_drain(struct vb *v, uint32_t *out)
{
	struct ibtca_poll_cq c[VB_DRAIN_BATCH];
	struct ibtca_poll_cq_batch b;
	uint32_t i;
	int n = 0;

	for (;;) {
		memset(&b, 0, sizeof(b));
		b.cqn = v->scq;
		b.max = VB_DRAIN_BATCH;
		b.entries = (uintptr_t)c;
		if (ioctl(v->fd, IBTCA_IOC_POLL_CQ_BATCH, &b) < 0)
			return -errno;
		for (i = 0; i < b.found; i++) {
			if (c[i].status != IBTCA_WC_SUCCESS) {
				fprintf(stderr, "ibtca-tool: bench WR %llu: %s\n",
					(unsigned long long)c[i].wr_id,
					vb_err(0, &c[i]));
				return -EIO;
			}
		}
		*out -= b.found;
		n += b.found;
		if (b.found < VB_DRAIN_BATCH)
			return n;
	}
}

/* Waits (in the driver) until at most @left sends are outstanding. */
static int vb_drain_to(struct vb *v, uint32_t *out, uint32_t left)
{
	struct ibtca_poll_cq c;
	int ret;

	while (*out > left) {
		ret = vb_poll(v, v->scq, &c, 60);
		if (ret)
			return ret;
		if (c.status != IBTCA_WC_SUCCESS)
			return -EIO;
		(*out)--;
	}
	return 0;
}

/*
 * Between two pings (outside the timed part): takes the send completions
 * that are ready once VB_LAT_DRAIN are outstanding, and waits for some
 * only if the SQ is nearly full.
 */
static int vb_lat_room(struct vb *v, uint32_t *out)
{
	int ret = 0;

	if (*out >= VB_LAT_DRAIN)
		ret = vb_drain(v, out);
	if (ret >= 0)
		ret = vb_drain_to(v, out, VB_LAT_MAX_OUT - 1);
	return ret < 0 ? ret : 0;
}

static uint64_t vb_seq_get(struct vb *v, uint32_t off)
{
	return __atomic_load_n((uint64_t *)(v->buf + off + VB_SEQ_OFF),
			       __ATOMIC_ACQUIRE);
}

static void vb_seq_set(struct vb *v, uint32_t off, uint64_t seq)
{
	__atomic_store_n((uint64_t *)(v->buf + off + VB_SEQ_OFF), seq,
			 __ATOMIC_RELEASE);
}

/*
 * Waits until our incoming slot holds @seq: spinning (VB_LAT_SPIN), or
 * (VB_LAT_NAP) spinning VB_NAP_SPIN_US, then sleeping VB_NAP_US between
 * looks.
 */
static int vb_spin_seq(struct vb *v, uint64_t seq, uint32_t how)
{
	double t0 = 0, end = 0;
	uint64_t got;
	unsigned int n = 0;

	if (how == VB_LAT_NAP)
		t0 = now_s();
	for (;;) {
		got = vb_seq_get(v, VB_LAT_OFF);
		if (got == seq)
			return 0;
		if (got > seq)
			return -EPROTO;
		if (how == VB_LAT_NAP && (now_s() - t0) * 1e6 >= VB_NAP_SPIN_US)
			usleep(VB_NAP_US);
		else if (++n % 4096)
			continue;
		if (!end)
			end = now_s() + VB_SPIN_SECS;
		else if (now_s() > end)
			return -ETIMEDOUT;
	}
}

/* Writes @seq from our outgoing slot into the peer's incoming one. */
static int vb_lat_write(struct vb *v, uint64_t seq)
{
	struct ibtca_post_send s = {
		.qpn = v->qp,
		.opcode = IBTCA_WR_RDMA_WRITE,
		.wr_id = ++v->wr_id,
		.addr = v->iova + VB_LAT_OFF + VB_LAT_LEN,
		.length = VB_LAT_LEN,
		.lkey = v->lkey,
		.remote_addr = v->peer_iova + VB_LAT_OFF,
		.rkey = v->peer_rkey,
	};

	vb_seq_set(v, VB_LAT_OFF + VB_LAT_LEN, seq);
	return ioctl(v->fd, IBTCA_IOC_POST_SEND, &s) < 0 ? -errno : 0;
}

/*
 * Server: answers @iters write_lat pings, waiting as @how says, then drains
 * its send CQ.
 */
static int vb_serve_lat(struct vb *v, uint64_t iters, uint32_t how)
{
	uint32_t out = 0;
	uint64_t i;
	int ret;

	vb_seq_set(v, VB_LAT_OFF, 0);
	ret = vb_send_simple(v, VB_RESULT, 1, iters);
	for (i = 1; !ret && i <= iters; i++) {
		ret = vb_lat_room(v, &out);
		if (!ret)
			ret = vb_spin_seq(v, i, how);
		if (!ret)
			ret = vb_lat_write(v, i);
		out += !ret;
	}
	return ret ? ret : vb_drain_to(v, &out, 0);
}

/*
 * Client: RDMA WRITEs of @size for VB_BW_SECS, VB_BW_DEPTH outstanding,
 * spread over the 1 MiB bulk area (same offset on both sides).
 */
static int vb_write_bw(struct vb *v, uint32_t size)
{
	const struct ibtca_post_send tmpl = {
		.qpn = v->qp,
		.opcode = IBTCA_WR_RDMA_WRITE,
		.length = size,
		.lkey = v->lkey,
		.rkey = v->peer_rkey,
	};
	struct ibtca_post_send s[VB_BW_DEPTH];
	struct ibtca_post_send_batch b;
	struct ibtca_poll_cq c;
	uint32_t slots = VB_BULK_LEN / size, out = 0;
	uint64_t posted = 0, done = 0, off;
	double t0, t, end, last;
	int n;

	t0 = now_s();
	end = t0 + VB_BW_SECS;
	last = t0;
	for (;;) {
		t = now_s();
		if (t >= end && !out)
			break;
		/*
		 * Refill in batches: one POST_SEND_BATCH (one SQ doorbell)
		 * for each.
		 */
		if (t < end && out <= VB_BW_DEPTH - VB_BW_BATCH) {
			n = 0;
			do {
				off = (posted % slots) * size;
				s[n] = tmpl;
				s[n].wr_id = ++v->wr_id;
				s[n].addr = v->iova + VB_BULK_OFF + off;
				s[n].remote_addr = v->peer_iova +
						   VB_BULK_OFF + off;
				posted++;
				n++;
			} while (++out < VB_BW_DEPTH);
			memset(&b, 0, sizeof(b));
			b.count = n;
			b.wrs = (uintptr_t)s;
			if (ioctl(v->fd, IBTCA_IOC_POST_SEND_BATCH, &b) < 0)
				return -errno;
			if (b.posted != (uint32_t)n)
				return -EIO;
		}
		n = vb_drain(v, &out);
		if (n < 0)
			return n;
		if (!n && out && size >= VB_BW_EVENT_MIN) {
			/* Nothing ready: sleep until the CQ interrupt. */
			n = vb_poll(v, v->scq, &c, 60);
			if (n)
				return n;
			if (c.status != IBTCA_WC_SUCCESS)
				return -EIO;
			out--;
			n = 1;
		}
		if (n) {
			done += n;
			last = now_s();
		} else if (t - last > 60) {
			return -ETIMEDOUT;
		}
	}
	t = last - t0;
	printf("IBTCA-PERF write_bw size=%u iters=%llu MBps=%.2f Mmsgps=%.6f depth=%u secs=%.3f\n",
	       size, (unsigned long long)done, done * (double)size / t / 1e6,
	       done / t / 1e6, VB_BW_DEPTH, t);
	return 0;
}

static int vb_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Prints an IBTCA-PERF line for @n one-way latencies (sorts @us). */
static void vb_print_lat(const char *name, double *us, uint32_t n)
{
	double sum = 0;
	uint32_t i;

	for (i = 0; i < n; i++)
		sum += us[i];
	qsort(us, n, sizeof(*us), vb_cmp_double);
	printf("IBTCA-PERF %s size=%u iters=%u typical_us=%.2f min_us=%.2f avg_us=%.2f p99_us=%.2f max_us=%.2f\n",
	       name, VB_LAT_LEN, n, us[n / 2], us[0], sum / n,
	       us[n * 99 / 100], us[n - 1]);
}

/*
 * Client: the write_lat ping-pong, both sides waiting as @how says; one-way
 * times are half a round trip.
 */
static int vb_write_lat(struct vb *v, uint32_t how)
{
	const uint32_t n = VB_LAT_WARMUP + VB_LAT_ITERS;
	double *us, t0;
	uint32_t i, out = 0;
	struct vb_msg m;
	int ret;

	us = calloc(VB_LAT_ITERS, sizeof(*us));
	if (!us)
		return -ENOMEM;
	vb_seq_set(v, VB_LAT_OFF, 0);
	ret = vb_send_simple(v, VB_LAT, how, n);
	if (!ret)
		ret = vb_expect(v, VB_RESULT, &m);
	for (i = 1; !ret && i <= n; i++) {
		ret = vb_lat_room(v, &out);
		if (ret)
			break;
		t0 = now_s();
		ret = vb_lat_write(v, i);
		out += !ret;
		if (!ret)
			ret = vb_spin_seq(v, i, how);
		if (!ret && i > VB_LAT_WARMUP)
			us[i - VB_LAT_WARMUP - 1] = (now_s() - t0) * 1e6 / 2;
	}
	if (!ret)
		ret = vb_drain_to(v, &out, 0);
	if (!ret)
		vb_print_lat(how == VB_LAT_NAP ? "write_lat_sleep" :
			     "write_lat", us, VB_LAT_ITERS);
	free(us);
	return ret;
}

/*
 * HELLO exchange of buffer address and R_Key. The client's HELLO is
 * retransmitted until the server's QP is ready; the server waits for it
 * (the client may boot later) and answers.
 */
int vb_exchange(struct vb *v)
{
	struct ibtca_poll_cq c;
	struct vb_msg m;
	char name[32];
	int ret;

	snprintf(name, sizeof(name), "exchange%s", v->tag ? v->tag : "");
	memset(&c, 0, sizeof(c));
	memset(&m, 0, sizeof(m));
	m.type = VB_HELLO;
	m.iova = v->iova;
	m.rkey = v->rkey;
	if (v->server) {
		ret = vb_expect_within(v, VB_HELLO, &m,
				       v->wait_s ? v->wait_s : 280);
		if (ret) {
			vcheck(name, 0, "no hello from the client: %s",
			       strerror(-ret));
			return ret;
		}
		v->peer_iova = m.iova;
		v->peer_rkey = m.rkey;
		m.iova = v->iova;
		m.rkey = v->rkey;
		ret = vb_send(v, &m, 60, &c);
	} else {
		ret = vb_send(v, &m, 200, &c);
		if (!ret)
			ret = vb_expect(v, VB_HELLO, &m);
		v->peer_iova = m.iova;
		v->peer_rkey = m.rkey;
	}
	vcheck(name, !ret, "peer_iova=0x%llx peer_rkey=0x%x %s",
	       (unsigned long long)v->peer_iova, v->peer_rkey, vb_err(ret, &c));
	return ret;
}

/* The server's side of the conversation, until the client says BYE. */
static void vb_serve(struct vb *v)
{
	struct vb_msg m;
	uint64_t counter;
	size_t i, bad;
	int ret, done = 0;

	while (!done) {
		ret = vb_recv(v, &m, 120);
		if (ret) {
			vcheck("protocol", 0, "receive: %s", strerror(-ret));
			return;
		}
		switch (m.type) {
		case VB_WRITTEN:
			i = vb_pattern_diff(v->buf + VB_BULK_OFF, m.value,
					    (uint8_t)m.ok);
			vcheck("rdma_write_data", i == m.value,
			       "%llu bytes, first mismatch at %zu",
			       (unsigned long long)m.value, i);
			ret = vb_send_simple(v, VB_RESULT, i == m.value, i);
			break;
		case VB_ATOMICS:
			memcpy(&counter, v->buf + VB_ATOM_OFF, 8);
			vcheck("atomics_memory", counter == m.value,
			       "counter=%llu expected=%llu",
			       (unsigned long long)counter,
			       (unsigned long long)m.value);
			ret = vb_send_simple(v, VB_RESULT, counter == m.value,
					     counter);
			break;
		case VB_BADKEY:
			for (bad = 0; bad < VB_BAD_LEN; bad++)
				if (v->buf[VB_BAD_OFF + bad] != VB_BAD_BYTE)
					break;
			vcheck("bad_rkey_unchanged", bad == VB_BAD_LEN,
			       "%u bytes at 0x%x, first changed at %zu",
			       VB_BAD_LEN, VB_BAD_OFF, bad);
			ret = vb_send_simple(v, VB_RESULT, bad == VB_BAD_LEN,
					     bad);
			break;
		case VB_PING:
			ret = vb_send_simple(v, VB_PONG, 1, m.value);
			break;
		case VB_LAT:
			ret = vb_serve_lat(v, m.value, m.ok);
			vcheck("write_lat_echo", !ret, "%llu round trips: %s",
			       (unsigned long long)m.value,
			       ret ? strerror(-ret) : "answered");
			break;
		case VB_BYE:
			vcheck("bye", 1, "client finished");
			done = 1;
			break;
		default:
			vcheck("protocol", 0, "unexpected message type %u",
			       m.type);
			return;
		}
		if (ret) {
			vcheck("protocol", 0, "reply: %s", strerror(-ret));
			return;
		}
	}
}

static void vb_server(struct vb *v)
{
	uint64_t counter = VB_COUNTER0;

	vb_pattern(v->buf + VB_READ_OFF, VB_READ_LEN, VB_READ_SEED);
	memcpy(v->buf + VB_ATOM_OFF, &counter, 8);
	memset(v->buf + VB_BAD_OFF, VB_BAD_BYTE, VB_BAD_LEN);
	if (!vb_exchange(v))
		vb_serve(v);
}

static int vb_atomic(struct vb *v, uint32_t opcode, uint32_t slot,
		     uint64_t cmp_add, uint64_t swap, uint64_t *old,
		     struct ibtca_poll_cq *c)
{
	struct ibtca_post_send s = {
		.qpn = v->qp,
		.opcode = opcode,
		.addr = v->iova + VB_ATOM_OFF + slot * 8,
		.length = 8,
		.lkey = v->lkey,
		.remote_addr = v->peer_iova + VB_ATOM_OFF,
		.rkey = v->peer_rkey,
		.compare_add = cmp_add,
		.swap = swap,
	};
	int ret;

	memset(v->buf + VB_ATOM_OFF + slot * 8, 0xff, 8);
	ret = vb_run(v, &s, v->scq, c, 60);
	memcpy(old, v->buf + VB_ATOM_OFF + slot * 8, 8);
	return ret;
}

/*
 * 64 B SEND ping-pong with the server (PING, PONG), both sides waiting for
 * completions in the driver (CQ interrupt). Returns the round trips done;
 * @us, if set, gets each one's half in microseconds.
 */
static int vb_send_pingpong(struct vb *v, int n, double *us)
{
	struct vb_msg m;
	double t0;
	int i;

	for (i = 0; i < n; i++) {
		t0 = now_s();
		if (vb_send_simple(v, VB_PING, 1, i) ||
		    vb_expect(v, VB_PONG, &m) || m.value != (uint64_t)i)
			break;
		if (us)
			us[i] = (now_s() - t0) * 1e6 / 2;
	}
	return i;
}

static void vb_client_bench(struct vb *v)
{
	struct ibtca_post_send s = {
		.qpn = v->qp,
		.opcode = IBTCA_WR_RDMA_WRITE,
		.addr = v->iova + VB_BULK_OFF,
		.length = VB_BULK_LEN,
		.lkey = v->lkey,
		.remote_addr = v->peer_iova + VB_BULK_OFF,
		.rkey = v->peer_rkey,
	};
	struct ibtca_poll_cq c;
	double t0, t;
	int i, ok = 1;

	t0 = now_s();
	for (i = 0; i < VB_BENCH_WRITES && ok; i++) {
		s.wr_id = ++v->wr_id;
		ok = ioctl(v->fd, IBTCA_IOC_POST_SEND, &s) == 0;
	}
	for (i = 0; i < VB_BENCH_WRITES && ok; i++)
		ok = !vb_poll(v, v->scq, &c, 60) && c.status == IBTCA_WC_SUCCESS;
	t = now_s() - t0;
	if (ok)
		printf("IBTCA-VERBS-BENCH rdma_write_pipelined MBps=%.1f writes=%d size=%u\n",
		       VB_BENCH_WRITES * (VB_BULK_LEN / 1e6) / t,
		       VB_BENCH_WRITES, VB_BULK_LEN);

	s.opcode = IBTCA_WR_RDMA_READ;
	t0 = now_s();
	if (ok && !vb_run(v, &s, v->scq, &c, 60) && c.status == IBTCA_WC_SUCCESS)
		printf("IBTCA-VERBS-BENCH rdma_read MBps=%.1f size=%u\n",
		       (VB_BULK_LEN / 1e6) / (now_s() - t0), VB_BULK_LEN);

	t0 = now_s();
	i = vb_send_pingpong(v, VB_PINGS, NULL);
	t = now_s() - t0;
	if (i == VB_PINGS)
		printf("IBTCA-VERBS-BENCH send_64B_rtt_us=%.1f round_trips=%d\n",
		       t * 1e6 / VB_PINGS, VB_PINGS);
	else
		printf("IBTCA-VERBS-BENCH send_64B_rtt_us=failed after %d\n", i);
}

static void vb_client(struct vb *v)
{
	struct ibtca_post_send s;
	struct ibtca_poll_cq c;
	uint64_t old, expect;
	struct vb_msg m;
	double t0, t;
	size_t diff;
	int ret;

	if (vb_exchange(v))
		return;

	/* RDMA WRITE of 1 MiB; the server checks the bytes. */
	vb_pattern(v->buf + VB_BULK_OFF, VB_BULK_LEN, VB_WRITE_SEED);
	memset(&s, 0, sizeof(s));
	s.qpn = v->qp;
	s.opcode = IBTCA_WR_RDMA_WRITE;
	s.addr = v->iova + VB_BULK_OFF;
	s.length = VB_BULK_LEN;
	s.lkey = v->lkey;
	s.remote_addr = v->peer_iova + VB_BULK_OFF;
	s.rkey = v->peer_rkey;
	t0 = now_s();
	ret = vb_run(v, &s, v->scq, &c, 60);
	t = now_s() - t0;
	vcheck("rdma_write", !ret && c.status == IBTCA_WC_SUCCESS &&
	       c.opcode == IBTCA_WC_RDMA_WRITE, "%u bytes %s", VB_BULK_LEN,
	       vb_err(ret, &c));
	if (!ret && c.status == IBTCA_WC_SUCCESS)
		printf("IBTCA-VERBS-BENCH rdma_write_1MiB MBps=%.1f us=%.0f\n",
		       (VB_BULK_LEN / 1e6) / t, t * 1e6);
	ret = vb_send_simple(v, VB_WRITTEN, VB_WRITE_SEED, VB_BULK_LEN);
	if (!ret)
		ret = vb_expect(v, VB_RESULT, &m);
	vcheck("rdma_write_remote", !ret && m.ok,
	       "server verified %u bytes: %s", VB_BULK_LEN,
	       ret ? strerror(-ret) : m.ok ? "match" : "mismatch");
	if (ret)
		return;

	/* RDMA READ of the server's pattern. */
	memset(v->buf + VB_READ_OFF, 0, VB_READ_LEN);
	s.opcode = IBTCA_WR_RDMA_READ;
	s.addr = v->iova + VB_READ_OFF;
	s.length = VB_READ_LEN;
	s.remote_addr = v->peer_iova + VB_READ_OFF;
	ret = vb_run(v, &s, v->scq, &c, 60);
	diff = vb_pattern_diff(v->buf + VB_READ_OFF, VB_READ_LEN, VB_READ_SEED);
	vcheck("rdma_read", !ret && c.status == IBTCA_WC_SUCCESS &&
	       c.opcode == IBTCA_WC_RDMA_READ && diff == VB_READ_LEN,
	       "%u bytes, first mismatch at %zu, %s", VB_READ_LEN, diff,
	       vb_err(ret, &c));

	/* Atomics on the server's counter (40). */
	ret = vb_atomic(v, IBTCA_WR_ATOMIC_FETCH_ADD, 0, 2, 0, &old, &c);
	vcheck("fetch_add", !ret && c.status == IBTCA_WC_SUCCESS &&
	       c.opcode == IBTCA_WC_FETCH_ADD && old == VB_COUNTER0,
	       "add 2: old=%llu expected=%u %s", (unsigned long long)old,
	       VB_COUNTER0, vb_err(ret, &c));
	ret = vb_atomic(v, IBTCA_WR_ATOMIC_CMP_SWP, 1, VB_COUNTER0 + 2, 7, &old,
			&c);
	vcheck("cmp_swap", !ret && c.status == IBTCA_WC_SUCCESS &&
	       c.opcode == IBTCA_WC_COMP_SWAP && old == VB_COUNTER0 + 2,
	       "compare %u swap 7: old=%llu %s", VB_COUNTER0 + 2,
	       (unsigned long long)old, vb_err(ret, &c));
	ret = vb_atomic(v, IBTCA_WR_ATOMIC_CMP_SWP, 2, 41, 9, &old, &c);
	vcheck("cmp_swap_miss", !ret && c.status == IBTCA_WC_SUCCESS && old == 7,
	       "compare 41 swap 9: old=%llu expected=7 %s",
	       (unsigned long long)old, vb_err(ret, &c));
	expect = 7;
	ret = vb_send_simple(v, VB_ATOMICS, 1, expect);
	if (!ret)
		ret = vb_expect(v, VB_RESULT, &m);
	vcheck("atomics_remote", !ret && m.ok && m.value == expect,
	       "server counter=%llu expected=%llu%s%s",
	       (unsigned long long)m.value, (unsigned long long)expect,
	       ret ? " error=" : "", ret ? strerror(-ret) : "");
	if (ret)
		return;

	/* RDMA WRITE with a wrong R_Key, on the second QP. */
	memset(&s, 0, sizeof(s));
	s.qpn = v->qp2;
	s.opcode = IBTCA_WR_RDMA_WRITE;
	s.addr = v->iova + VB_BULK_OFF;
	s.length = VB_BAD_LEN;
	s.lkey = v->lkey;
	s.remote_addr = v->peer_iova + VB_BAD_OFF;
	s.rkey = v->peer_rkey ^ 0x80;
	ret = vb_run(v, &s, v->scq2, &c, 60);
	vcheck("bad_rkey", !ret && c.status == IBTCA_WC_REM_ACCESS_ERR,
	       "rkey=0x%x (valid 0x%x): %s, expected status=%u", s.rkey,
	       v->peer_rkey, vb_err(ret, &c), IBTCA_WC_REM_ACCESS_ERR);
	ret = vb_send_simple(v, VB_BADKEY, 1, 0);
	if (!ret)
		ret = vb_expect(v, VB_RESULT, &m);
	vcheck("bad_rkey_remote_unchanged", !ret && m.ok,
	       "server region %s", ret ? strerror(-ret) :
	       m.ok ? "unchanged" : "CHANGED");
	if (ret)
		return;

	vb_client_bench(v);

	ret = vb_send_simple(v, VB_BYE, 1, 0);
	vcheck("bye", !ret, "%s", ret ? strerror(-ret) : "server told");
}

/* Client side of verbs-bench. */
static void vb_client_perf(struct vb *v)
{
	static const uint32_t sizes[] = { 64, 4096, VB_BULK_LEN };
	double us[VB_PINGS];
	struct vb_msg m;
	uint32_t i;
	int ret, n;

	if (vb_exchange(v))
		return;
	vb_pattern(v->buf + VB_BULK_OFF, VB_BULK_LEN, VB_WRITE_SEED);
	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		ret = vb_write_bw(v, sizes[i]);
		vcheck("write_bw", !ret, "size=%u %s", sizes[i],
		       ret ? strerror(-ret) : "done");
		if (ret)
			return;
	}
	/* The last 1 MiB writes left our pattern in the server's bulk area. */
	ret = vb_send_simple(v, VB_WRITTEN, VB_WRITE_SEED, VB_BULK_LEN);
	if (!ret)
		ret = vb_expect(v, VB_RESULT, &m);
	vcheck("write_bw_remote", !ret && m.ok, "server verified %u bytes: %s",
	       VB_BULK_LEN, ret ? strerror(-ret) : m.ok ? "match" : "mismatch");
	if (ret)
		return;

	ret = vb_write_lat(v, VB_LAT_SPIN);
	vcheck("write_lat", !ret, "%s", ret ? strerror(-ret) : "done");
	if (ret)
		return;
	ret = vb_write_lat(v, VB_LAT_NAP);
	vcheck("write_lat_sleep", !ret, "%s", ret ? strerror(-ret) : "done");
	if (ret)
		return;

	/* For comparison: SEND/RECV round trips through the CQ interrupt. */
	n = vb_send_pingpong(v, VB_PINGS, us);
	if (n == VB_PINGS)
		vb_print_lat("send_lat", us, VB_PINGS);
	vcheck("send_lat", n == VB_PINGS, "%d of %d round trips", n, VB_PINGS);
	if (n != VB_PINGS)
		return;

	ret = vb_send_simple(v, VB_BYE, 1, 0);
	vcheck("bye", !ret, "%s", ret ? strerror(-ret) : "server told");
}

static int cmd_verbs(int argc, char **argv, int bench)
{
	struct vb v = { .fd = -1 };
	const char *role = NULL;
	uint32_t lid = 0, sl = 0;
	char detail[160];
	int i;

	for (i = 0; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--role"))
			role = argv[i + 1];
		else if (!strcmp(argv[i], "--peer-lid") &&
			 !parse_u32(argv[i + 1], &lid) && lid && lid < 0xc000)
			v.peer_lid = (uint16_t)lid;
		else if (!strcmp(argv[i], "--sl") &&
			 !parse_u32(argv[i + 1], &sl) && sl <= 14)
			v.sl = (uint8_t)sl;
		else if (!strcmp(argv[i], "--wait") &&
			 !parse_u32(argv[i + 1], &v.wait_s) && v.wait_s)
			continue;
		else
			usage();
	}
	if (i != argc || !role || !v.peer_lid ||
	    (strcmp(role, "server") && strcmp(role, "client")))
		usage();
	v.server = !strcmp(role, "server");

	v.fd = open_dev();
	if (v.fd < 0) {
		vcheck("setup", 0, "cannot open %s", dev_path);
	} else if (vb_setup(&v, detail, sizeof(detail))) {
		vcheck("setup", 0, "%s", detail);
	} else {
		vcheck("setup", 1, "role=%s %s", role, detail);
		/* The server serves both (write_lat pings come as VB_LAT). */
		if (v.server)
			vb_server(&v);
		else if (bench)
			vb_client_perf(&v);
		else
			vb_client(&v);
		if (!bench)
			vb_teardown(&v);
	}
	/* Closing the file (and unmapping) destroys every object. */
	if (v.buf && v.buf != MAP_FAILED)
		munmap(v.buf, VB_BUF_SIZE);
	if (v.fd >= 0)
		close(v.fd);
	printf("IBTCA-VERBS-SUMMARY %d passed, %d failed\n", n_pass, n_fail);
	return n_fail || !n_pass;
}

int main(int argc, char **argv)
{
	const char *cmd;

	setvbuf(stdout, NULL, _IOLBF, 0);
	argv++;
	argc--;
	if (argc >= 2 && !strcmp(argv[0], "-d")) {
		dev_path = argv[1];
		argv += 2;
		argc -= 2;
	}
	if (argc < 1)
		usage();
	cmd = argv[0];
	argv++;
	argc--;

	if (!strcmp(cmd, "info") && !argc)
		return cmd_info();
	if (!strcmp(cmd, "selftest") && !argc)
		return cmd_selftest();
	if (!strcmp(cmd, "bench-mmio"))
		return cmd_bench(argc, argv);
	if (!strcmp(cmd, "reg"))
		return cmd_reg(argc, argv);
	if (!strcmp(cmd, "irq"))
		return cmd_irq(argc, argv);
	if (!strcmp(cmd, "dma"))
		return cmd_dma(argc, argv);
	if (!strcmp(cmd, "port-wait"))
		return cmd_port_wait(argc, argv);
	if (!strcmp(cmd, "dma-fault") && !argc)
		return cmd_fault();
	if (!strcmp(cmd, "verbs"))
		return cmd_verbs(argc, argv, 0);
	if (!strcmp(cmd, "verbs-bench"))
		return cmd_verbs(argc, argv, 1);
	if (!strcmp(cmd, "drdma"))
		return cmd_drdma(argc, argv, 0);
	if (!strcmp(cmd, "drdma-bench"))
		return cmd_drdma(argc, argv, 1);
	if (!strcmp(cmd, "drdma-fan"))
		return cmd_drdma_fan(argc, argv);
	usage();
	return 2;
}
