// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca-verbs: the guest test commands that need only the verbs every
 * RDMA device has, through libibverbs and the ibtca provider (the
 * device's own registers, self-tests and DRDMA window stay with
 * ibtca-tool). docs/guest-verbs-surface.md says which commands are here.
 * main is here, each command in its own file (commands.h), the usage text
 * in usage.c, below them the guest pair (pair.c) and the libibverbs
 * helpers (rc.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "usage.h"

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
	if (!strcmp(cmd, "verbs"))
		return cmd_verbs(dev, argc, argv);
	if (!strcmp(cmd, "verbs-bench"))
		return cmd_verbs_bench(dev, argc, argv);
	if (!strcmp(cmd, "soak"))
		return cmd_soak(dev, argc, argv);
	usage();
}
