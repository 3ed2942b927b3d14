#!/usr/bin/env bash
# The soak test (issue 19; not part of scripts/test.sh): three guests on one
# switch doing RDMA between every pair for N minutes while every switch port
# drops, duplicates, reorders and corrupts 1 % of what it sends, with one
# node (its device and its guest) killed with SIGKILL and restarted a third
# of the way through. Passes if every message the guests completed arrived
# byte-exact, every failed one got an error completion, no device exited by
# itself and every device's RssAnon stayed within the bound. Installs what
# is missing (VM stack, release build, guest initramfs) like demo.sh, then
# runs target/release/ibtca-soak (tests/src/bin/ibtca-soak.rs), which
# prints the report (RELIABILITY.md, "Soak").
#
#   scripts/soak.sh                  # 10 minutes
#   scripts/soak.sh --minutes 30     # the recorded run
#   scripts/soak.sh --keep           # keep consoles and logs even if it passed
#   scripts/soak.sh --help           # every option of ibtca-soak
#
# Run it at normal priority: the guests' QEMU run at nice 19 anyway, and a
# device that gets no CPU for (retry_cnt + 1) x 67 ms breaks every
# connection to it (the report lists the host stalls the runner saw).
#
# Options go to ibtca-soak as they are (--kill NODE|none, --kill-at F,
# --topology FILE, --run-dir DIR, --rss-bound-mib N). The guest build goes
# to $IBTCA_GUEST_DIR (default $IBTCA_CACHE/guest). Setting up takes about
# a minute when everything is built already (release build, guest boot).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/chroot-mounts.sh

for a in "$@"; do
	case "$a" in
	-h | --help)
		sed -n '2,/^set -euo/{ /^set -euo/d; s/^# \{0,1\}//; p; }' "$0"
		echo
		exec cargo run --release -q -p ibtca-tests --bin ibtca-soak -- --help
		;;
	esac
done

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

CACHE=${IBTCA_CACHE:-$HOME/.cache/ibtca}
say "VM stack (QEMU, guest kernel) in $CACHE"
bash scripts/setup-vm-stack.sh
# shellcheck disable=SC1091
. "$CACHE/stack.env"
CHROOT=$(readlink -f "$IBTCA_CHROOT")
trap 'ibtca_chroot_release "$CHROOT"' EXIT

say "building ibtca-device, ibtca-switch and ibtca-soak (release)"
cargo build --release -q -p ibtca-device -p ibtca-switch -p ibtca-tests --bins
GUEST=${IBTCA_GUEST_DIR:-$CACHE/guest}
export IBTCA_GUEST_DIR=$GUEST
say "building the guest module, tool and initramfs in $GUEST"
bash scripts/build-guest.sh "$GUEST"

target=${CARGO_TARGET_DIR:-target}
say "soak: ${target}/release/ibtca-soak $*"
"$target/release/ibtca-soak" "$@"
