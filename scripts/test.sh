#!/usr/bin/env bash
# The project's test command (README, .ci/run): installs the VM stack if it is
# missing, then runs every test: fast no-VM tests and full-stack tests that
# boot real guests under QEMU.
#
#   scripts/test.sh              # everything
#   scripts/test.sh --no-vm      # only the fast tests (no QEMU, no root)
#
# IBTCA_TEST_NO_FAIL_FAST=1 runs every test binary even after one failed
# (scripts/soak-suite.sh sets it), instead of stopping at the first.
# At the end of the cargo test step, scripts/test-times.sh lists every test
# binary's wall time, slowest first.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/chroot-mounts.sh
step_name=test.sh
. scripts/steps.sh

vm=1
[ "${1:-}" = "--no-vm" ] && vm=0

# Tests that try something again report every failed try into this file
# (tests/harness/retries.rs); it is printed at the end, also when every
# retried step finally passed.
IBTCA_RETRY_LOG=$(mktemp "${TMPDIR:-/tmp}/ibtca-retries.XXXXXX")
export IBTCA_RETRY_LOG
report_retries() {
	if [ -s "$IBTCA_RETRY_LOG" ]; then
		say "tries that failed before one passed (or before the test gave up):"
		cat "$IBTCA_RETRY_LOG" >&2
	fi
	rm -f -- "$IBTCA_RETRY_LOG"
}
on_exit() {
	local rc=$?
	report_retries
	[ "$vm" = 1 ] && [ -n "${IBTCA_CHROOT:-}" ] && ibtca_chroot_release "$IBTCA_CHROOT"
	say "exit status $rc"
}
# VMs run chrooted; leave nothing mounted behind, whatever happens.
trap on_exit EXIT

if [ "$vm" = 1 ]; then
	step bash scripts/setup-vm-stack.sh
	. "${IBTCA_CACHE:-$HOME/.cache/ibtca}/stack.env"
	step bash scripts/build-guest.sh
fi

step bash scripts/host-tools.sh
step cargo build --workspace --all-targets
keep_going=()
[ "${IBTCA_TEST_NO_FAIL_FAST:-0}" = 1 ] && keep_going=(--no-fail-fast)
if [ "$vm" = 1 ]; then
	# VM tests take the VM lock (tests/harness/vm_lock.rs): one at a time.
	step bash scripts/test-times.sh cargo test --workspace "${keep_going[@]}" -- --include-ignored
else
	step bash scripts/test-times.sh cargo test --workspace "${keep_going[@]}"
fi
