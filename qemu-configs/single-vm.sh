#!/usr/bin/env bash
# One guest with one ibtca device: starts ibtca-device, then QEMU with the
# bundled guest (or your own kernel/initrd), and stops the device on exit.
#
#   qemu-configs/single-vm.sh                      # interactive busybox shell
#   qemu-configs/single-vm.sh --mode foundation    # self-test, then power off
#   qemu-configs/single-vm.sh --kernel K --initrd I [--append "..."]
#
# The QEMU command line it runs (run-vm.sh prints it) is the one to copy
# into your own setup; the parts that matter for ibtca are:
#
#   -object memory-backend-memfd,id=mem,size=512M,share=on   guest RAM the device can DMA into
#   -machine q35,memory-backend=mem
#   -device '{"driver":"vfio-user-pci","id":"tca0","socket":{"type":"unix","path":"/path/tca0.sock"}}'
#   -accel tcg -cpu max                                       (KVM only with kvm_intel/kvm_amd)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/chroot-mounts.sh"

CACHE=${IBTCA_CACHE:-$HOME/.cache/ibtca}
mode=shell
kernel=$CACHE/guest/vmlinuz
initrd=$CACHE/guest/initramfs.cpio.gz
append=
while [ $# -gt 0 ]; do
	case "$1" in
	--mode) mode=$2; shift 2 ;;
	--kernel) kernel=$2; shift 2 ;;
	--initrd) initrd=$2; shift 2 ;;
	--append) append=$2; shift 2 ;;
	-h | --help) sed -n '2,/^set -euo/{ /^set -euo/d; s/^# \{0,1\}//; p; }' "$0"; exit 0 ;;
	*) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
done

bash "$root/scripts/setup-vm-stack.sh"
. "$CACHE/stack.env"
cargo build --release -q --manifest-path "$root/Cargo.toml" -p ibtca-device
[ -f "$initrd" ] || bash "$root/scripts/build-guest.sh"

run=$(mktemp -d "$IBTCA_CHROOT/tmp/ibtca-vm.XXXXXX")
"$root/target/release/ibtca-device" --socket "$run/tca0.sock" 2>"$run/device.log" &
dev=$!
trap 'kill $dev 2>/dev/null; wait $dev 2>/dev/null; ibtca_chroot_release "$IBTCA_CHROOT"; rm -rf "$run"' EXIT
for _ in $(seq 100); do [ -S "$run/tca0.sock" ] && break; sleep 0.1; done

bash "$root/scripts/run-vm.sh" --socket "$run/tca0.sock" --kernel "$kernel" --initrd "$initrd" \
	--append "ibtca.mode=$mode $append" --timeout 86400
