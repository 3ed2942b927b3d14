#!/usr/bin/env bash
# Kernel style of the guest driver's kernel code (guest-driver/kernel/ and
# the kernel verbs tests, guest-driver/tests/kernel/), both must be clean:
#
#   checkpatch.pl --strict   scripts/checkpatch.sh (the kernel's own script,
#                            cached in $IBTCA_CACHE/checkpatch)
#   sparse                   `make C=2` (every file checked) in the VM-stack
#                            chroot against Debian stable's kernel headers
#                            (IBTCA_KVER_STABLE). Debian's sparse 0.6.4 does
#                            not know the backports kernel's headers
#                            (__typeof_unqual__: its Makefile switches the
#                            checker off), so stable's are the ones it checks.
#
#   scripts/kernel-style.sh      # exit 1 on any checkpatch or sparse message
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
# shellcheck source=scripts/chroot-mounts.sh
. "$here/chroot-mounts.sh"
CACHE=${IBTCA_CACHE:-$HOME/.cache/ibtca}
# shellcheck disable=SC1091
. "$CACHE/stack.env"
CHROOT=$(readlink -f "${IBTCA_CHROOT:?stack.env does not set IBTCA_CHROOT}")
log() { printf '[kernel-style] %s\n' "$*" >&2; }

rc=0
log "checkpatch.pl --strict"
bash "$here/checkpatch.sh" || rc=1

kver=${IBTCA_KVER_STABLE:-$(cat "$CHROOT/.ibtca-kver-stable" 2>/dev/null || true)}
[ -n "$kver" ] || { log "no stable kernel in the stack: run scripts/setup-vm-stack.sh"; exit 1; }
[ -x "$CHROOT/usr/bin/sparse" ] || { log "no sparse in $CHROOT: run scripts/setup-vm-stack.sh"; exit 1; }

ibtca_chroot_scratch "$CHROOT" ibtca-sparse
# The kernel sources and their headers, without build products.
(cd "$root/guest-driver" && find Kbuild include kernel tests/kernel -type f \
	\( -name '*.c' -o -name '*.h' -o -name Kbuild \) -print0 |
	tar -cf - --null -T -) | tar -xf - -C "$build"
log "sparse against $kver headers"
out=$build/sparse.log
if ! chroot "$CHROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
	LC_ALL=C.UTF-8 make -s -j"$(nproc)" -C "/usr/src/linux-headers-$kver" \
	M="$ibuild" C=2 modules >"$out" 2>&1; then
	cat "$out" >&2
	log "the build with sparse failed"
	exit 1
fi
if grep -q 'specified, but' "$out"; then
	cat "$out" >&2
	log "the kernel's Makefile did not run sparse"
	exit 1
fi
if grep -E 'warning:|error:' "$out" >&2; then
	log "sparse: the messages above"
	rc=1
fi
[ "$rc" = 0 ] && log "clean"
exit $rc
