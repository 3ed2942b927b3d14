// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca-verbs: the guest test commands that need only the verbs every
 * RDMA device has, through libibverbs and the ibtca provider (the
 * device's own registers, self-tests and DRDMA window stay with
 * ibtca-tool). docs/guest-verbs-surface.md says which commands are here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "rc.h"

static void print_usage(FILE *out)
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

int main(int argc, char **argv)
{
	const char *dev = "ibtca0";
	const char *cmd;

	argc--;
	argv++;
	if (argc >= 2 && !strcmp(argv[0], "-d")) {
		dev = argv[1];
		argc -= 2;
		argv += 2;
	}
	if (!argc)
		usage();
	cmd = argv[0];
	argc--;
	argv++;
	if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
		print_usage(stdout);
		return 0;
	}
	if (!strcmp(cmd, "atm-echo"))
		return cmd_atm_echo(dev, argc, argv);
	usage();
}
