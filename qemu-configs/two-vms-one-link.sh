#!/usr/bin/env bash
# Two guests on one IB link: starts two ibtca devices (LID 1 and 2) joined by
# a link, then prints the two QEMU command lines to run (one per terminal)
# with your own kernel and disk, or boots the bundled guests with --run.
#
#   qemu-configs/two-vms-one-link.sh [DIR]          # devices + command lines
#   qemu-configs/two-vms-one-link.sh --run [DIR]    # also boot the bundled guests (verbs scenario)
#
# DIR (default /tmp/ibtca-2vm) holds the sockets; the devices stop on Ctrl-C.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
run=0
[ "${1:-}" = "--run" ] && { run=1; shift; }
if [ "$run" = 1 ]; then
	exec bash "$root/scripts/demo.sh"
fi
dir=${1:-/tmp/ibtca-2vm}
mkdir -p "$dir"
cargo build --release -q --manifest-path "$root/Cargo.toml" -p ibtca-device
"$root/target/release/ibtca-device" --socket "$dir/a.sock" --lid 1 --link "listen:$dir/ab.link" &
a=$!
"$root/target/release/ibtca-device" --socket "$dir/b.sock" --lid 2 --link "connect:$dir/ab.link" &
b=$!
trap 'kill $a $b 2>/dev/null; wait $a $b 2>/dev/null' EXIT INT TERM
for s in a b; do
	cat <<EOT

# guest $s (LID $([ $s = a ] && echo 1 || echo 2)):
qemu-system-x86_64 -accel tcg -cpu max -m 1G \\
  -object memory-backend-memfd,id=mem,size=1G,share=on -machine q35,memory-backend=mem \\
  -device '{"driver":"vfio-user-pci","id":"tca0","socket":{"type":"unix","path":"$dir/$s.sock"}}' \\
  -kernel YOUR_KERNEL -initrd YOUR_INITRD -append "console=ttyS0" -nographic
EOT
done
echo
echo "devices running (Ctrl-C stops them)"
wait
