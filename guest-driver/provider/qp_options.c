// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Seed 002's choices for unmodified programs: the environment, read once,
 * gives every RC QP of the process its MSN start and ACK policy, which
 * the provider sends as ibv_modify_qp's driver data (struct
 * ibtca_modify_qp_cmd) on the modify to RTR:
 *
 *   IBTCA_MSN_START=N   the MSN before the first message, 0..0xffffff
 *                       (decimal or 0x hex; both ends set the same)
 *   IBTCA_ACK=LIST      comma-separated: one mode of per-message (the
 *                       default), per-packet or coalesced:N (1..65535:
 *                       an ACK is asked for at most N packets apart,
 *                       closer at a quarter window and on the last packet
 *                       to send; ACKs due in one burst go as one, so N is
 *                       a bound, not an exact count), and a window of window:N
 *                       (packets in flight, 0..1024, 0 the device's
 *                       default) or stop-and-wait (window:1)
 *
 * A bad value is said on stderr, naming the variable and what it takes,
 * and every modify to RTR of an RC QP fails with EINVAL.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibtca.h"
#include "ibtca_uverbs.h"

static pthread_once_t ibtca_env_once = PTHREAD_ONCE_INIT;
static struct ibtca_modify_qp_cmd ibtca_env_options;
static int ibtca_env_error;

/* @s as a number in [0, @max] (decimal or 0x hex); 0, or -1. */
static int ibtca_env_number(const char *s, unsigned long max,
			    unsigned long *out)
{
	int base = 10;
	char *end;

	if (!strncmp(s, "0x", 2) || !strncmp(s, "0X", 2)) {
		base = 16;
		s += 2;
	}
	if (*s < '0' || (base == 10 && *s > '9'))
		return -1;
	errno = 0;
	*out = strtoul(s, &end, base);
	return errno || *end || end == s || *out > max ? -1 : 0;
}

static void ibtca_env_bad(const char *var, const char *value,
			  const char *accepted)
{
	fprintf(stderr,
		"ibtca: %s=\"%s\" is not valid: it takes %s; RC QPs will not connect (EINVAL)\n",
		var, value, accepted);
	ibtca_env_error = 1;
}

#define IBTCA_ACK_FORMS \
	"a comma-separated list of one mode (per-message, per-packet or coalesced:N with N 1..65535) and one window (window:N with N 0..1024, or stop-and-wait)"

/* One item of IBTCA_ACK into @o; 0, or -1 if it is not one. */
static int ibtca_env_ack_item(const char *item, int *mode, int *window,
			      struct ibtca_modify_qp_cmd *o)
{
	unsigned long n;

	if (!strcmp(item, "per-message") || !strcmp(item, "per-packet")) {
		if ((*mode)++)
			return -1;
		o->ack_mode = item[4] == 'm' ? IBTCA_ACK_PER_MESSAGE :
					       IBTCA_ACK_PER_PACKET;
	} else if (!strncmp(item, "coalesced:", 10)) {
		if ((*mode)++ || ibtca_env_number(item + 10, 65535, &n) || !n)
			return -1;
		o->ack_mode = IBTCA_ACK_COALESCED;
		o->ack_every = n;
	} else if (!strcmp(item, "stop-and-wait")) {
		if ((*window)++)
			return -1;
		o->window = 1;
	} else if (!strncmp(item, "window:", 7)) {
		if ((*window)++ ||
		    ibtca_env_number(item + 7, IBTCA_MODIFY_QP_MAX_WINDOW, &n))
			return -1;
		o->window = n;
	} else {
		return -1;
	}
	return 0;
}

static void ibtca_env_parse(void)
{
	struct ibtca_modify_qp_cmd *o = &ibtca_env_options;
	const char *msn = getenv("IBTCA_MSN_START");
	const char *ack = getenv("IBTCA_ACK");
	int mode = 0, window = 0;
	unsigned long n;

	if (msn) {
		if (ibtca_env_number(msn, 0xffffff, &n)) {
			ibtca_env_bad("IBTCA_MSN_START", msn,
				      "a number 0..0xffffff (decimal or 0x hex)");
		} else {
			o->comp_mask |= IBTCA_MODIFY_QP_MSN;
			o->initial_msn = n;
		}
	}
	if (ack) {
		char *copy = strdup(ack), *item, *save = NULL;
		int bad = !copy;

		for (item = copy ? strtok_r(copy, ",", &save) : NULL;
		     item && !bad; item = strtok_r(NULL, ",", &save))
			bad = ibtca_env_ack_item(item, &mode, &window, o);
		free(copy);
		/* Nothing but commas, or nothing at all, chooses nothing. */
		bad = bad || (!mode && !window);
		if (bad)
			ibtca_env_bad("IBTCA_ACK", ack, IBTCA_ACK_FORMS);
		else
			o->comp_mask |= IBTCA_MODIFY_QP_ACK_POLICY;
	}
}

int ibtca_qp_env_options(struct ibtca_modify_qp_cmd *o)
{
	int invalid = EINVAL;	/* libibverbs' positive errno */

	pthread_once(&ibtca_env_once, ibtca_env_parse);
	if (ibtca_env_error)
		return invalid;
	*o = ibtca_env_options;
	return 0;
}

int ibtca_modify_qp_options(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
			    int attr_mask, int *sent)
{
	struct ib_uverbs_ex_modify_qp_resp resp = {};
	struct uibtca_modify_qp cmd = {};
	struct ibtca_modify_qp_cmd o;
	int err;

	*sent = 0;
	if (ibqp->qp_type != IBV_QPT_RC || !(attr_mask & IBV_QP_STATE) ||
	    attr->qp_state != IBV_QPS_RTR)
		return 0;
	err = ibtca_qp_env_options(&o);
	if (err || !o.comp_mask)
		return err;
	cmd.comp_mask = o.comp_mask;
	cmd.initial_msn = o.initial_msn;
	cmd.ack_every = o.ack_every;
	cmd.window = o.window;
	cmd.ack_mode = o.ack_mode;
	*sent = 1;
	return ibv_cmd_modify_qp_ex(ibqp, attr, attr_mask, &cmd.ibv_cmd,
				    sizeof(cmd), &resp, sizeof(resp));
}
