#!/usr/bin/env bash
# The README's main command: installs what is missing (VM stack, Rust build,
# guest module), brings up the two-node topology qemu-configs/two-nodes.json
# with `ibtca-fabric up --guests` (two ibtca devices joined by an IB link and
# two Linux guests under QEMU that bind them), and has them do RDMA to each other:
# SEND/RECV, RDMA WRITE and READ, atomics, and a bad-R_Key write that must
# fail. Prints what each guest saw, then `ibtca-fabric down`.
#
#   scripts/demo.sh            # run the demo
#   scripts/demo.sh --keep     # leave the run directory (consoles, logs) behind
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/chroot-mounts.sh

step_name=demo.sh
. scripts/steps.sh

keep=0
[ "${1:-}" = "--keep" ] && keep=1

say "VM stack (QEMU, guest kernel) in ${IBTCA_CACHE:-$HOME/.cache/ibtca}"
step bash scripts/setup-vm-stack.sh
. "${IBTCA_CACHE:-$HOME/.cache/ibtca}/stack.env"
CHROOT=$(readlink -f "$IBTCA_CHROOT")

say "building ibtca-device, ibtca-switch and ibtca-fabric (release; cargo shows each crate)"
step cargo build --release -p ibtca-device -p ibtca-switch -p ibtca-fabric
say "building the guest module, tool and initramfs"
step bash scripts/build-guest.sh
GUEST=${IBTCA_CACHE:-$HOME/.cache/ibtca}/guest

# cargo put the binaries under $CARGO_TARGET_DIR when it is set.
fabric_bin=${CARGO_TARGET_DIR:-target}/release/ibtca-fabric
run=$(mktemp -d "$CHROOT/tmp/ibtca-demo.XXXXXX")
fab=$run/fabric
cleanup() {
	"$fabric_bin" down --run-dir "$fab" >/dev/null 2>&1 || true
	ibtca_chroot_release "$CHROOT"
	if [ "$keep" = 1 ]; then
		echo "consoles and logs kept in $run" >&2
	else
		rm -rf -- "$run"
	fi
}
trap cleanup EXIT

say "ibtca-fabric up --guests qemu-configs/two-nodes.json: two devices (LID 1 and 2), one IB link, two guests (TCG, about 20-40 s)"
# The launcher starts the devices, waits for the link, then boots one guest
# per node (consoles in $fab/NODE.console) and, with --wait, returns when
# both guests have powered off.
step "$fabric_bin" up qemu-configs/two-nodes.json --run-dir "$fab" \
	--guests --wait --guest-timeout 300 \
	--kernel "$GUEST/vmlinuz" --initrd "$GUEST/initramfs.cpio.gz" \
	--append "a=ibtca.mode=verbs ibtca.role=server ibtca.peer_lid=2" \
	--append "b=ibtca.mode=verbs ibtca.role=client ibtca.peer_lid=1" || true
cp "$fab/a.console" "$run/server.console" 2>/dev/null || : >"$run/server.console"
cp "$fab/b.console" "$run/client.console" 2>/dev/null || : >"$run/client.console"

show() { # show ROLE
	local c=$run/$1.console
	echo "  $1 guest (LID $([ "$1" = server ] && echo 1 || echo 2)):"
	grep -m1 'IBTCA-PCI' "$c" | sed 's/^IBTCA-PCI /    PCI function /' || true
	grep 'IBTCA-VERBS ' "$c" | sed 's/^IBTCA-VERBS /    /' || true
	grep 'IBTCA-VERBS-BENCH' "$c" | sed 's/^IBTCA-VERBS-BENCH /    measured: /' || true
	grep -m1 'IBTCA-VERBS-SUMMARY' "$c" | sed 's/^IBTCA-VERBS-SUMMARY /    result: /' || echo "    no result"
}
echo
echo "ibtca demo: two guests, two devices, one InfiniBand link"
show server
show client
echo
ok=1
for r in server client; do
	grep -q 'IBTCA-VERBS-SUMMARY [0-9]* passed, 0 failed' "$run/$r.console" || ok=0
done
if [ "$ok" != 1 ]; then
	echo "demo FAILED; consoles:" >&2
	cat "$run/server.console" "$run/client.console" >&2
	exit 1
fi
echo "both guests passed: RDMA between two VMs over ibtca"
steps_done
