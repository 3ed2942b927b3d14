#!/usr/bin/env bash
# The README's main command: installs what is missing (VM stack, Rust build,
# guest module), starts one ibtca device, boots a Linux guest under QEMU that
# binds it, and prints what the guest saw.
#
#   scripts/demo.sh            # run the demo
#   scripts/demo.sh --keep     # leave the run directory (logs) behind
#
# Today's demo is the foundation: PCI enumeration, register round trip,
# MSI-X interrupts, DMA into guest memory, trapped-MMIO timing. The fabric
# demo (guests doing RDMA over a link) replaces it when the verbs/RC work lands.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/chroot-mounts.sh

keep=0
[ "${1:-}" = "--keep" ] && keep=1

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

say "VM stack (QEMU, guest kernel) in ${IBTCA_CACHE:-$HOME/.cache/ibtca}"
bash scripts/setup-vm-stack.sh
. "${IBTCA_CACHE:-$HOME/.cache/ibtca}/stack.env"
CHROOT=$(readlink -f "$IBTCA_CHROOT")

say "building ibtca-device (release)"
cargo build --release -q -p ibtca-device
say "building the guest module, tool and initramfs"
bash scripts/build-guest.sh
GUEST=${IBTCA_CACHE:-$HOME/.cache/ibtca}/guest

run=$(mktemp -d "$CHROOT/tmp/ibtca-demo.XXXXXX")
dev_pid=
cleanup() {
	[ -n "$dev_pid" ] && kill "$dev_pid" 2>/dev/null && wait "$dev_pid" 2>/dev/null
	ibtca_chroot_release "$CHROOT"
	if [ "$keep" = 1 ]; then
		echo "logs kept in $run" >&2
	else
		rm -rf -- "$run"
	fi
}
trap cleanup EXIT

say "starting ibtca-device on $run/tca0.sock"
target/release/ibtca-device --socket "$run/tca0.sock" 2>"$run/device.log" &
dev_pid=$!
for _ in $(seq 100); do [ -S "$run/tca0.sock" ] && break; sleep 0.1; done
[ -S "$run/tca0.sock" ] || { cat "$run/device.log" >&2; exit 1; }

say "booting a guest (TCG, about 10 s)"
bash scripts/run-vm.sh --socket "$run/tca0.sock" --kernel "$GUEST/vmlinuz" \
	--initrd "$GUEST/initramfs.cpio.gz" --append "ibtca.mode=foundation" \
	--timeout 300 >"$run/console.log" || true

c=$run/console.log
field() { grep -m1 "$1" "$c" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
ok() { grep -q "$1" "$c" && echo yes || echo NO; }
echo
echo "ibtca demo: one guest, one device"
printf '  %-34s %s\n' "PCI function seen by the guest" "$(grep -m1 'IBTCA-PCI' "$c" | cut -d' ' -f2-)"
printf '  %-34s %s\n' "driver probe" "$(grep -m1 'ibtca: probe' "$c" | sed 's/.*ibtca: probe //')"
printf '  %-34s %s\n' "scratch register round trip" "$(ok 'selftest scratch ok')"
printf '  %-34s %s\n' "MSI-X interrupt delivered" "$(ok 'selftest irq vector=0 ok')"
printf '  %-34s %s\n' "device DMA into guest memory" "$(ok 'selftest dma fill ok')"
printf '  %-34s %s\n' "guest tool self-test" "$(grep -m1 'IBTCA-SELFTEST ' "$c" | cut -d' ' -f2-)"
printf '  %-34s %s ns\n' "trapped BAR read (guest)" "$(field IBTCA-BENCH mmio_read_ns)"
printf '  %-34s %s ns\n' "posted BAR write (guest)" "$(field IBTCA-BENCH mmio_write_ns)"
printf '  %-34s %s\n' "module unloaded cleanly" "$(ok 'IBTCA-UNLOAD ok')"
echo
grep -q 'IBTCA-SELFTEST .* 0 failed' "$c" && grep -q 'IBTCA-UNLOAD ok' "$c" || {
	echo "demo FAILED; console:" >&2
	cat "$c" >&2
	exit 1
}
