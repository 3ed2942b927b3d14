//! Full stack, two machines: two `ibtca-device` processes joined by a link
//! (LIDs 1 and 2), each serving one QEMU guest. The guests' `ibtca-verbs
//! verbs` (libibverbs through the ibtca provider and the ib_core device)
//! connect a QP pair through the real driver (command queue, WQEs,
//! doorbells, CQEs in guest memory), exchange buffer addresses and R_Keys
//! with SEND/RECV, and run RDMA WRITE, RDMA READ, fetch-and-add,
//! compare-and-swap and an RDMA WRITE with a bad R_Key, each checked on both
//! sides, then destroy every object (a PD with objects in it refused).
//!
//! Needs the VM stack (scripts/setup-vm-stack.sh) and root for the chroot:
//! `scripts/test.sh` runs it; plain `cargo test` lists it as ignored.

use std::time::Duration;

use ibtca_tests::vm::run_guest_pair;

use ibtca_tests::vm::{VERBS_CLIENT_CHECKS as CLIENT_CHECKS, VERBS_SERVER_CHECKS as SERVER_CHECKS};

#[test]
#[ignore = "boots QEMU guests; run by scripts/test.sh"]
fn two_guests_do_send_rdma_atomics_and_bad_rkey_over_the_link() {
    run_guest_pair(
        "verbs",
        "IBTCA-VERBS",
        &[],
        Duration::from_secs(300),
        SERVER_CHECKS,
        CLIENT_CHECKS,
    );
}
