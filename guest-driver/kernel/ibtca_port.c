// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca port state and asynchronous events.
 *
 * The device raises EVENT_VECTOR (the driver routes it to
 * IBTCA_EVENT_VECTOR) when its port goes down or up, with
 * IBTCA_EVENT_PORT_CHANGE set in EVENT_CAUSE, and when an SRQ falls below
 * its limit (IBTCA_EVENT_SRQ_LIMIT: ibtca_ib_srq.c finds which), or the SM
 * changed the P_Key table (IBTCA_EVENT_PKEY_CHANGE: ibtca_ib_pkey.c reads
 * it again). The handler defers to a work item, which clears the cause,
 * reads PORT_STATE, logs the change, wakes IBTCA_IOC_PORT_WAIT callers and
 * tells the RDMA core (ibtca_ib.c).
 */

#include <linux/pci.h>
#include <linux/uaccess.h>
#include <linux/workqueue.h>

#include "ibtca.h"

static const char *ibtca_port_name(u32 state)
{
	switch (state) {
	case IBTCA_PORT_DOWN:
		return "DOWN";
	case IBTCA_PORT_INIT:
		return "INIT";
	case IBTCA_PORT_ARMED:
		return "ARMED";
	case IBTCA_PORT_ACTIVE:
		return "ACTIVE";
	default:
		return "unknown";
	}
}

static void ibtca_port_work(struct work_struct *work)
{
	struct ibtca_dev *idev = container_of(work, struct ibtca_dev,
					      port_work);
	u32 cause, state, old, lid, old_lid;

	down_read(&idev->hw_sem);
	if (READ_ONCE(idev->dead)) {
		up_read(&idev->hw_sem);
		return;
	}
	cause = ibtca_rd(idev, IBTCA_REG_EVENT_CAUSE);
	if (cause)
		ibtca_wr(idev, IBTCA_REG_EVENT_CAUSE, cause);
	state = ibtca_rd(idev, IBTCA_REG_PORT_STATE);
	lid = ibtca_rd(idev, IBTCA_REG_PORT_LID);
	up_read(&idev->hw_sem);

	if (cause & IBTCA_EVENT_SRQ_LIMIT)
		ibtca_ib_srq_events(idev);
	if (cause & IBTCA_EVENT_PKEY_CHANGE)
		ibtca_ib_pkey_event(idev);

	/* A change between the read and the clear still shows in the state. */
	if (!(cause & IBTCA_EVENT_PORT_CHANGE) &&
	    state == READ_ONCE(idev->port_state))
		return;
	old = READ_ONCE(idev->port_state);
	old_lid = READ_ONCE(idev->port_lid);
	WRITE_ONCE(idev->port_state, state);
	WRITE_ONCE(idev->port_lid, lid);
	atomic_inc(&idev->port_events);
	dev_info(&idev->pdev->dev, "port %s lid %u (%d changes)\n",
		 ibtca_port_name(state), lid,
		 atomic_read(&idev->port_events));
	wake_up_all(&idev->wq);
	/* Active to Active is an event only if the SM changed the LID. */
	if (state != old || lid != old_lid)
		ibtca_ib_port_event(idev, old, state);
}

/* Called from the MSI-X handler of IBTCA_EVENT_VECTOR. */
void ibtca_port_irq(struct ibtca_dev *idev)
{
	schedule_work(&idev->port_work);
}

/* Before the interrupts are requested. */
void ibtca_port_early(struct ibtca_dev *idev)
{
	INIT_WORK(&idev->port_work, ibtca_port_work);
	atomic_set(&idev->port_events, 0);
}

/* Once the device is reset and usable: route and clear port events. */
void ibtca_port_init(struct ibtca_dev *idev)
{
	idev->port_state = ibtca_rd(idev, IBTCA_REG_PORT_STATE);
	idev->port_lid = ibtca_rd(idev, IBTCA_REG_PORT_LID);
	if (idev->nvec <= IBTCA_EVENT_VECTOR) {
		dev_warn(&idev->pdev->dev,
			 "%d vectors: port events are not delivered\n",
			 idev->nvec);
		return;
	}
	ibtca_wr(idev, IBTCA_REG_EVENT_VECTOR, IBTCA_EVENT_VECTOR);
	ibtca_wr(idev, IBTCA_REG_EVENT_CAUSE,
		 IBTCA_EVENT_PORT_CHANGE | IBTCA_EVENT_SRQ_LIMIT);
	dev_info(&idev->pdev->dev, "port %s\n",
		 ibtca_port_name(idev->port_state));
}

void ibtca_port_remove(struct ibtca_dev *idev)
{
	cancel_work_sync(&idev->port_work);
}

static bool ibtca_port_changed(struct ibtca_dev *idev, u32 after)
{
	return (u32)atomic_read(&idev->port_events) > after ||
	       READ_ONCE(idev->dead);
}

/*
 * IBTCA_IOC_PORT_WAIT: waits until more than @after port changes were seen
 * (or @timeout_ms passed; 0 only reads), then reports the state.
 */
long ibtca_port_wait(struct ibtca_dev *idev, void __user *argp)
{
	struct ibtca_port_wait w;
	long left;

	if (copy_from_user(&w, argp, sizeof(w)))
		return -EFAULT;
	if (w.timeout_ms > IBTCA_UAPI_PORT_WAIT_MAX_MS || w.reserved)
		return -EINVAL;
	if (w.timeout_ms) {
		left = wait_event_interruptible_timeout(idev->wq,
							ibtca_port_changed(idev, w.after),
							msecs_to_jiffies(w.timeout_ms));
		if (left < 0)
			return left;
	}
	if (READ_ONCE(idev->dead))
		return -ENODEV;
	w.events = atomic_read(&idev->port_events);
	w.state = READ_ONCE(idev->port_state);
	if (copy_to_user(argp, &w, sizeof(w)))
		return -EFAULT;
	return w.events > w.after || !w.timeout_ms ? 0 : -ETIMEDOUT;
}
