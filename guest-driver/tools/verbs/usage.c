// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca-verbs' usage text, with the defaults of the QP options (usage.h).
 */
#include <stdio.h>
#include <stdlib.h>

#include "rc.h"
#include "usage.h"

void print_usage(FILE *out)
{
	fprintf(out,
		"Usage: ibtca-verbs [-d DEV] COMMAND\n"
		"  atm-echo --peer-lid L --peer-qpn Q[,Q...] --frames N\n"
		"        [--xor B] [--sl SL] [--wait SECS]\n"
		"                       an RC QP to each QPN Q at LID L (an\n"
		"                       ATM gateway's VCs); sends every message\n"
		"                       received back on its QP, bytes XORed\n"
		"                       with B, N times (IBTCA-ATM-ECHO lines;\n"
		"                       --wait: seconds for each message)\n"
		"  verbs --role server|client --peer-lid L [--sl SL] [--wait SECS]\n"
		"                       two RC QPs to the peer guest's at LID L\n"
		"                       (QPNs 0x402, 0x403 on a fresh device):\n"
		"                       SEND/RECV, RDMA WRITE and READ, atomics,\n"
		"                       a bad R_Key, each checked on both sides,\n"
		"                       then teardown (IBTCA-VERBS lines; --wait:\n"
		"                       the server's seconds for the HELLO)\n"
		"  verbs-bench --role server|client --peer-lid L [--sl SL]\n"
		"        [--wait SECS]\n"
		"                       the same two QPs: perftest-style\n"
		"                       write_bw, write_lat, write_lat_sleep and\n"
		"                       send_lat (IBTCA-PERF lines from the\n"
		"                       client), the last 1 MiB written checked\n"
		"                       by the server, then teardown\n"
		"  soak --lids L,L[,...] --seconds N [--self-lid L] [--grace S]\n"
		"                       an RC QP to every other LID of the list\n"
		"                       (this guest's included): RDMA WRITE +\n"
		"                       SEND for N s, every message checked,\n"
		"                       broken connections made again\n"
		"                       (IBTCA-SOAK lines)\n"
		"  --help               this text\n"
		"QP options of every command (the defaults are perftest's):\n"
		"  --timeout EXP        ACK timeout 4.096 us << EXP, EXP 0-31\n"
		"                       (0: none; default %u)\n"
		"  --retry N            transport retries, 0-7 (default %u)\n"
		"DEV (a libibverbs device name) defaults to ibtca0.\n",
		RC_TIMEOUT_DEFAULT, RC_RETRY_DEFAULT);
}

void usage(void)
{
	print_usage(stderr);
	exit(2);
}
