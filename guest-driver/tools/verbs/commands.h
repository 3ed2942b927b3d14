/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The commands of ibtca-verbs that main (ibtca-verbs.c) runs, each in its
 * own file, and the usage text they exit with on a bad argument.
 */
#ifndef IBTCA_VERBS_COMMANDS_H
#define IBTCA_VERBS_COMMANDS_H

/* ibtca-verbs.c: prints the usage text and exits with status 2. */
void usage(void);

/* atm_echo.c; @dev: the libibverbs device name (NULL: the first). */
int cmd_atm_echo(const char *dev, int argc, char **argv);

#endif /* IBTCA_VERBS_COMMANDS_H */
