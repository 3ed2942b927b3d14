/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The commands of ibtca-tool that main (ibtca-tool.c) runs and other files
 * define, each in its own file.
 */
#ifndef IBTCA_TOOL_COMMANDS_H
#define IBTCA_TOOL_COMMANDS_H

/* drdma.c */
int cmd_drdma(int argc, char **argv, int bench);
/* drdma_fan.c */
int cmd_drdma_fan(int argc, char **argv);
/* uverbs_mr.c */
int cmd_uverbs_mr(int argc, char **argv);

#endif /* IBTCA_TOOL_COMMANDS_H */
