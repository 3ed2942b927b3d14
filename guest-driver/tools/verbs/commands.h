/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The commands of ibtca-verbs that main (ibtca-verbs.c) runs, each in its
 * own file.
 */
#ifndef IBTCA_VERBS_COMMANDS_H
#define IBTCA_VERBS_COMMANDS_H

/* atm_echo.c; @dev: the libibverbs device name (NULL: the first). */
int cmd_atm_echo(const char *dev, int argc, char **argv);

/* verbs.c; @dev as for cmd_atm_echo. */
int cmd_verbs(const char *dev, int argc, char **argv);

/* bench.c; @dev as for cmd_atm_echo. */
int cmd_verbs_bench(const char *dev, int argc, char **argv);

/* soak.c; @dev as for cmd_atm_echo. */
int cmd_soak(const char *dev, int argc, char **argv);

#endif /* IBTCA_VERBS_COMMANDS_H */
