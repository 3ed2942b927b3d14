# shellcheck shell=bash
# Mount helpers for the VM-stack chroot. Sourced, not run.
#
# The chroot gets proc, sys and a *bind* of the host's /dev. Deleting the
# chroot while /dev is bound into it would delete the host's device nodes, so
# every deletion goes through ibtca_chroot_assert_unmounted first.

# Mount proc, sys and /dev into chroot $1 (idempotent, and safe when several
# VMs start at once: a lock serialises the check-then-mount).
ibtca_chroot_mount() {
	local root=$1
	mkdir -p "$root/proc" "$root/sys" "$root/dev"
	(
		flock 9
		mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
		mountpoint -q "$root/sys" || mount -t sysfs sysfs "$root/sys"
		mountpoint -q "$root/dev" || mount --bind /dev "$root/dev"
	) 9>"$root/.ibtca-mount.lock"
}

# Unmount everything below chroot $1, deepest first (idempotent).
ibtca_chroot_umount() {
	local root mnt
	root=$(readlink -f "$1" 2>/dev/null) || return 0
	[ -d "$root" ] || return 0
	# shellcheck disable=SC2013
	for mnt in $(awk -v r="$root" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/mounts | sort -r); do
		umount "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
	done
}

# Fail loudly if anything is still mounted below chroot $1.
ibtca_chroot_assert_unmounted() {
	local root
	root=$(readlink -f "$1" 2>/dev/null) || return 0
	if awk -v r="$root" '$2 == r || index($2, r "/") == 1 { found = 1 } END { exit !found }' /proc/mounts; then
		echo "refusing to continue: mounts remain under $root" >&2
		return 1
	fi
}

# Unmount chroot $1 unless a process still runs inside it (another VM): the
# last user out unmounts. Safe to call from every script's exit trap.
ibtca_chroot_release() {
	local root p
	root=$(readlink -f "$1" 2>/dev/null) || return 0
	for p in /proc/[0-9]*; do
		if [ "$(readlink "$p/root" 2>/dev/null)" = "$root" ]; then
			return 0
		fi
	done
	ibtca_chroot_umount "$root"
}

# A scratch directory PREFIX.XXXXXX under chroot $1's /tmp for a build run
# inside it: sets $build (its host path) and $ibuild (its path inside the
# chroot), mounts the chroot, and on exit removes the directory and
# releases the mounts unless they were there before (another build or a
# VM may be using them). Takes over the EXIT, INT and TERM traps.
ibtca_chroot_scratch() {
	_ibtca_scratch_root=$1
	_ibtca_scratch_prefix=$2
	_ibtca_premounted=0
	if mountpoint -q "$1/proc" && mountpoint -q "$1/sys" && mountpoint -q "$1/dev"; then
		_ibtca_premounted=1
	fi
	build=$(mktemp -d "$1/tmp/$2.XXXXXX")
	ibuild=${build#"$1"}
	trap _ibtca_scratch_cleanup EXIT
	trap 'exit 130' INT TERM
	ibtca_chroot_mount "$1"
}

_ibtca_scratch_cleanup() {
	# $build is a plain directory made under the chroot's /tmp.
	case "$build" in
	"$_ibtca_scratch_root/tmp/$_ibtca_scratch_prefix".*) rm -rf -- "$build" ;;
	esac
	if [ "$_ibtca_premounted" = 0 ]; then
		ibtca_chroot_release "$_ibtca_scratch_root"
	fi
}
