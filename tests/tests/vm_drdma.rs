//! Full stack, Direct RDMA (seed 000): two `ibtca-device` processes joined
//! by a link (LIDs 1 and 2), each serving one QEMU guest. The guests'
//! `ibtca-tool drdma` connect two QP pairs (path MTU 2048 and 256) through
//! the real driver; the server guest plays the TCA (an I/O controller
//! moving data through its trapped DRDMA window, BAR2), the client the
//! initiator:
//! - I/O read (seed Fig. 15): SEND {VA, 4096, READ} -> ARR submitted as
//!   WRITE, WR_DRDMA_WRITE, mixed-size stores in a shuffled order -> two
//!   RDMA WRITE packets at MTU 2048 -> status SEND; bytes checked by the
//!   client;
//! - I/O write (Fig. 16): SEND {VA, 4096, WRITE} -> ARR submitted as READ,
//!   WR_DRDMA_READ at MTU 256 (16 responses), mixed-size loads and
//!   memcpy_fromio (the first loads held by the device until the data
//!   comes) -> bytes checked by the server -> status SEND;
//! - the refused accesses (free range, past the length, load from a WRITE
//!   range, submit on a busy ARR, bad length, non-dedicated PMB) while a
//!   range is half filled, which still arrives intact;
//! - all 32 ranges submitted on shuffled PMBs, half filled at once, then
//!   sent to 32 places of the client's buffer;
//! - the no-PMB fallback (seed Fig 17/18a, `drdma_bounce.c`): the server
//!   dedicates 3 PMBs (DRDMA_PMB_DEDICATED) and submits a batch of 8 DRDMA
//!   WRITEs, then 8 DRDMA READs; in each batch exactly 3 go through window
//!   ranges and 5 are refused with DRDMA_ERR_NO_PMB and go through bounce
//!   buffers in guest memory as ordinary RDMA WRITEs and READs (the
//!   completions' opcodes say which); the client checks the 8 WRITEs'
//!   bytes and that 10 transfers fell back, the server the 8 READs' bytes.
//!   Trapped window only: the mapped one fixes the dedication.
//!
//! ARR bits are checked from the guest wherever they are deterministic.
//! The same I/O runs once more with the window mapped (`--drdma-window
//! mapped`): QEMU mmaps BAR2 and the guest commits byte counts.
//!
//! Three guests on one switch (`ibtca-tool drdma-fan`): the guest on LID 1
//! has all 32 ranges in flight at once, even ones DRDMA WRITEs to LID 2, odd
//! ones to LID 3, range 2j and 2j + 1 at the same offset of both peers'
//! buffers (overlapping remote address spaces); each peer checks its 16
//! slots, then 32 DRDMA READs bring every slot back into LID 1's window,
//! where the bytes are checked. Trapped and mapped (where one
//! DRDMA_SUBMIT_MASK and one DRDMA_COMMIT_MASK cover all 32 ranges).
//!
//! Needs the VM stack (scripts/setup-vm-stack.sh) and root for the chroot:
//! `scripts/test.sh` runs it; plain `cargo test` lists it as ignored.

use std::time::Duration;

use ibtca_tests::vm::{run_guest_pair, run_guest_trio};

const SERVER_CHECKS: &[&str] = &[
    "setup",
    "window",
    "load_timeout",
    "exchange",
    "io_read_submit_bits",
    "io_read_post",
    "io_read_half_filled",
    "io_read_filled_bits",
    "io_read_completion",
    "io_read_arr_free",
    "io_read_no_errors",
    "io_write_submit_bits",
    "io_write_post",
    "io_write_partial_drain_bits",
    "io_write_data",
    "io_write_completion",
    "io_write_arr_free",
    "io_write_no_errors",
    "err_active_range",
    "err_store_free_range",
    "err_load_free_range",
    "err_store_past_ttl",
    "err_small_range_filled",
    "err_load_write_range",
    "err_submit_busy",
    "err_submit_bad_length",
    "err_submit_pmb_not_dedicated",
    "err_active_range_completion",
    "err_small_range_completion",
    "err_ranges_free",
    "all_submitted",
    "all_half_filled",
    "all_completions",
    "all_free",
    "bounce_dedicated",
    "bounce_write_paths",
    "bounce_write_completions",
    "bounce_write_free",
    "bounce_read_paths",
    "bounce_read_completions",
    "bounce_read_data",
    "bounce_read_free",
    "bounce_restored",
    "bye",
];

const CLIENT_CHECKS: &[&str] = &[
    "setup",
    "exchange",
    "io_read_status",
    "io_read_data",
    "io_write_status",
    "errors_status",
    "errors_active_range_data",
    "errors_small_range_data",
    "all_status",
    "all_data",
    "bounce_status",
    "bounce_data",
    "bye",
];

/// Runs the two guests with the window in `window` mode; every check listed
/// must pass (and no other check may fail).
fn run_two_guests(window: &str, server_checks: &[&str], client_checks: &[&str]) {
    run_guest_pair(
        "drdma",
        "IBTCA-DRDMA",
        &["--drdma-window", window],
        Duration::from_secs(420),
        server_checks,
        client_checks,
    );
}

#[test]
#[ignore = "boots QEMU guests; run by scripts/test.sh"]
fn two_guests_move_io_through_the_drdma_window() {
    run_two_guests("trapped", SERVER_CHECKS, CLIENT_CHECKS);
}

/// The same I/O through the mapped window: QEMU mmaps BAR2 (the PMB
/// pages), the guests' stores and loads go straight to memory and every
/// fill and drain commits its byte count through DRDMA_COMMIT; a drain
/// waits for PCI Valid and reads the response where RESP_OFFSET and RRPL
/// say. Refused accesses cannot be seen in a mapped window, so those cases
/// are not run, nor the no-PMB fallback (range n is PMB n for good there).
#[test]
#[ignore = "boots QEMU guests; run by scripts/test.sh"]
fn two_guests_move_io_through_the_mapped_window() {
    let skip = |c: &&str| !c.starts_with("err") && !c.starts_with("bounce");
    let server: Vec<&str> = SERVER_CHECKS.iter().copied().filter(skip).collect();
    let client: Vec<&str> = CLIENT_CHECKS.iter().copied().filter(skip).collect();
    run_two_guests("mapped", &server, &client);
}

const FAN_SERVER_CHECKS: &[&str] = &[
    "setup_b",
    "setup_c",
    "window",
    "exchange_b",
    "exchange_c",
    "fan_write_submitted",
    "fan_write_half_filled",
    "fan_write_completions",
    "fan_write_free",
    "fan_write_peers",
    "fan_read_submitted",
    "fan_read_data",
    "fan_read_completions",
    "fan_read_free",
    "bye_b",
    "bye_c",
];

const FAN_CLIENT_CHECKS: &[&str] = &[
    "setup",
    "exchange",
    "fan_write_status",
    "fan_write_data",
    "bye",
];

/// Three TCG guests share two host CPUs: far slower than two.
fn run_three_guests(window: &str) {
    run_guest_trio(
        "drdma-fan",
        "IBTCA-DRDMA",
        &["--drdma-window", window],
        Duration::from_secs(900),
        FAN_SERVER_CHECKS,
        FAN_CLIENT_CHECKS,
    );
}

#[test]
#[ignore = "boots QEMU guests; run by scripts/test.sh"]
fn three_guests_all_ranges_in_flight_to_two_peers() {
    run_three_guests("trapped");
}

#[test]
#[ignore = "boots QEMU guests; run by scripts/test.sh"]
fn three_guests_all_ranges_in_flight_to_two_peers_mapped() {
    run_three_guests("mapped");
}
