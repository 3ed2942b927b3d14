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
 *   ibtca-tool [-d /dev/ibtcaN] drdma --role server|client --peer-lid N
 *   ibtca-tool [-d /dev/ibtcaN] drdma-bench --role server|client --peer-lid N
 *   ibtca-tool [-d /dev/ibtcaN] drdma-fan --role server|client --peer-lid L[,L]
 *                                         [--index I]
 *   ibtca-tool --help
 *
 * The drdma commands also take --timeout EXP and --retry N (the ACK
 * timeout and transport retries of their QPs). The verbs commands every
 * RDMA device has (verbs, verbs-bench, soak, atm-echo) are ibtca-verbs',
 * on libibverbs (tools/verbs/).
 *
 * This file has main and the device commands; the drdma scenarios are in
 * drdma.c (drdma, drdma-bench) and drdma_fan.c (drdma-fan) on drdma_lib.c
 * and the verbs helpers (QP set-up, messages, polling) of verbs_lib.c,
 * user memory through uverbs in uverbs_mr.c; below them all the check
 * lines and counts (report.c), the device node (dev.c), number arguments
 * (parse.c); the usage text is usage.c.
 * Their headers: report.h, dev.h, parse.h, usage.h, verbs_lib.h and
 * drdma_lib.h (what the DRDMA files share); commands.h declares what main
 * runs. A file calls only files below it.
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

#include "commands.h"
#include "dev.h"
#include "parse.h"
#include "report.h"
#include "usage.h"
#include "verbs_lib.h"

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

static void check(const char *name, int ok, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport("IBTCA-TEST", name, ok, fmt, ap);
	va_end(ap);
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
	if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
		print_usage(stdout);
		return 0;
	}
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
	if (!strcmp(cmd, "drdma"))
		return cmd_drdma(argc, argv, 0);
	if (!strcmp(cmd, "drdma-bench"))
		return cmd_drdma(argc, argv, 1);
	if (!strcmp(cmd, "drdma-fan"))
		return cmd_drdma_fan(argc, argv);
	if (!strcmp(cmd, "uverbs-mr"))
		return cmd_uverbs_mr(argc, argv);
	usage();
	return 2;
}
