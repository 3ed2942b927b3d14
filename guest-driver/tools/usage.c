// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca-tool's usage text, with the defaults of the QP options.
 */
#include <stdio.h>
#include <stdlib.h>

#include "usage.h"
#include "verbs_lib.h"

void print_usage(FILE *out)
{
	fprintf(out,
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
		"  uverbs-mr [UVERBS]   register user memory through the RDMA\n"
		"                       core (uverbs write ABI, page-list\n"
		"                       regions; IBTCA-UVERBS-MR lines)\n"
		"  --help               this text\n"
		"(verbs, verbs-bench and soak are ibtca-verbs', on libibverbs)\n"
		"Options of drdma, drdma-bench and drdma-fan for their QPs\n"
		"(the defaults are perftest's):\n"
		"  --timeout EXP        ACK timeout 4.096 us << EXP, EXP 0-31\n"
		"                       (0: none; default %u, %.0f ms)\n"
		"  --retry N            transport retries, 0-7 (default %u): a\n"
		"                       peer that stops answering fails the\n"
		"                       oldest request after (N + 1) timeouts\n"
		"                       (WC_RETRY_EXC_ERR, the rest flushed)\n"
		"DEV defaults to /dev/ibtca0.\n",
		VB_TIMEOUT_DEFAULT, 4.096e-3 * (1U << VB_TIMEOUT_DEFAULT),
		VB_RETRY_DEFAULT);
}

void usage(void)
{
	print_usage(stderr);
	exit(2);
}
