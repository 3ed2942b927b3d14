#!/usr/bin/env bash
# The project's test command (README, .ci/run): installs the VM stack if it is
# missing, then runs every test: fast no-VM tests and full-stack tests that
# boot real guests under QEMU.
#
#   scripts/test.sh              # everything
#   scripts/test.sh --no-vm      # only the fast tests (no QEMU, no root)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/chroot-mounts.sh

vm=1
[ "${1:-}" = "--no-vm" ] && vm=0

if [ "$vm" = 1 ]; then
	bash scripts/setup-vm-stack.sh
	. "${IBTCA_CACHE:-$HOME/.cache/ibtca}/stack.env"
	# VMs run chrooted; leave nothing mounted behind, whatever happens.
	trap 'ibtca_chroot_release "$IBTCA_CHROOT"' EXIT
	bash scripts/build-guest.sh
fi

bash scripts/host-tools.sh
cargo build --workspace --all-targets
if [ "$vm" = 1 ]; then
	cargo test --workspace -- --include-ignored
else
	cargo test --workspace
fi
