/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ibtca: the kernels the driver builds against, and the RDMA core
 * interfaces that differ between them.
 *
 * Supported: Linux 6.12 (Debian stable's series) to 7.3 (the backports
 * kernel of the VM stack); both are built and tested in CI. Other versions
 * stop the build here; make IBTCA_UNTESTED_KERNEL=1 builds against a newer
 * kernel anyway.
 */
#ifndef IBTCA_COMPAT_H
#define IBTCA_COMPAT_H

#include <linux/version.h>

#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 12, 0)
#error "ibtca supports Linux 6.12 to 7.3: this kernel is older"
#endif
#if LINUX_VERSION_CODE >= KERNEL_VERSION(7, 4, 0) && \
	!defined(IBTCA_UNTESTED_KERNEL)
#error "ibtca supports Linux 6.12 to 7.3: this kernel is newer (see docs/own-kernel.md)"
#endif

/* reg_user_mr takes a DMA handle (struct ib_dmah) from 6.17 on. */
#define IBTCA_HAVE_IB_DMAH (LINUX_VERSION_CODE >= KERNEL_VERSION(6, 17, 0))

/* 7.2 renamed ib_umem_get() to ib_umem_get_va(). */
#if LINUX_VERSION_CODE < KERNEL_VERSION(7, 2, 0)
#define ib_umem_get_va ib_umem_get
#endif

#endif /* IBTCA_COMPAT_H */
