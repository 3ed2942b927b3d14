/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ibtca-tool's device node (-d, default /dev/ibtca0) and its BAR0 register
 * ioctls (dev.c).
 */
#ifndef IBTCA_TOOL_DEV_H
#define IBTCA_TOOL_DEV_H

#include <stdint.h>

extern const char *dev_path;
int open_dev(void);
int reg_read(int fd, uint32_t off, uint32_t *val);
int reg_write(int fd, uint32_t off, uint32_t val);

#endif /* IBTCA_TOOL_DEV_H */
