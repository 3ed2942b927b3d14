// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca-tool's device: the character device the commands open (-d, default
 * /dev/ibtca0) and its BAR0 register ioctls.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>

#include "dev.h"
#include "ibtca_uapi.h"

const char *dev_path = "/dev/ibtca0";

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
