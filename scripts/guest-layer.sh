#!/usr/bin/env bash
# The package layer of Debian-root guests (docs/guest-root.md): installs
# PKG... with apt into a throwaway overlay of the VM-stack chroot and keeps
# the overlay's upper directory as the layer, cached outside the clone in
#   $IBTCA_CACHE/layers/KEY/upper     the layer (guests stack it read-only)
#   $IBTCA_CACHE/layers/KEY/packages  the packages asked for
#   $IBTCA_CACHE/layers/KEY/installed the packages apt installed (NAME VERSION)
#   $IBTCA_CACHE/layers/KEY/apt.log   apt's output
# KEY hashes the sorted package list and the chroot's dpkg status, so the
# same list over the same chroot reuses the layer and a changed chroot gets
# a fresh one. Prints the layer's directory (KEY/upper) on stdout.
#
#   scripts/guest-layer.sh PKG...
#
# Exit status: 0 done or reused, 2 bad arguments or no VM stack, 3 a
# package apt does not know, 4 apt failed (its log says why; "no network"
# when the mirror was unreachable). The chroot itself is never written.
set -euo pipefail

log() { printf '[guest-layer] %s\n' "$*" >&2; }
die() { code=$1; shift; log "error: $*"; exit "$code"; }

[ $# -gt 0 ] || die 2 "usage: guest-layer.sh PKG..."
for p in "$@"; do
	[[ "$p" =~ ^[a-z0-9][a-z0-9+.-]+$ ]] || die 2 "'$p' is not a Debian package name"
done
CACHE=${IBTCA_CACHE:-$HOME/.cache/ibtca}
[ -r "$CACHE/stack.env" ] || die 2 "$CACHE/stack.env missing: run scripts/setup-vm-stack.sh"
# shellcheck disable=SC1091
. "$CACHE/stack.env"
CHROOT=$(readlink -f "${IBTCA_CHROOT:?stack.env does not set IBTCA_CHROOT}")
[ -r "$CHROOT/var/lib/dpkg/status" ] || die 2 "no Debian system in $CHROOT"

mapfile -t pkgs < <(printf '%s\n' "$@" | LC_ALL=C sort -u)
key=$({
	printf 'packages=%s\n' "${pkgs[*]}"
	sha256sum <"$CHROOT/var/lib/dpkg/status"
} | sha256sum | cut -c1-16)
layers=$CACHE/layers
dir=$layers/$key
mkdir -p "$layers"
exec 9>"$layers/.$key.lock"
flock 9
if [ -f "$dir/done" ]; then
	exec 8>&-
	log "reusing $dir (${pkgs[*]})"
	echo "$dir/upper"
	exit 0
fi

# Installs into the chroot itself (setup-vm-stack.sh, other scripts) hold
# this lock: a layer is built over a chroot at rest.
exec 8>"$CACHE/apt.lock"
flock 8

in_chroot() { # the chroot's apt, read-only: no lock, no cache written
	chroot "$CHROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C "$@"
}
for p in "${pkgs[@]}"; do
	in_chroot apt-cache show --no-all-versions "$p" >/dev/null 2>&1 ||
		die 3 "no package '$p' in the chroot's package lists (apt-cache show $p)"
done

tmp=$(mktemp -d "$layers/.build.XXXXXX")
merged=$tmp/merged
cleanup() {
	local m
	for m in dev/pts dev proc sys; do
		mountpoint -q "$merged/$m" && umount -l "$merged/$m"
	done
	mountpoint -q "$merged" && umount -l "$merged"
	rm -rf -- "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$tmp/upper" "$tmp/work" "$merged"
mount -t overlay -o "lowerdir=$CHROOT,upperdir=$tmp/upper,workdir=$tmp/work" \
	ibtca-layer "$merged"
mount -t proc proc "$merged/proc"
mount -t sysfs sysfs "$merged/sys"
mount --bind /dev "$merged/dev"
in_merged() {
	chroot "$merged" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C \
		DEBIAN_FRONTEND=noninteractive "$@"
}
installed_list() { # NAME VERSION of every installed package
	in_merged dpkg-query -W -f '${db:Status-Abbrev} ${Package} ${Version}\n' |
		awk '$1 == "ii" { print $2, $3 }' | LC_ALL=C sort
}
before=$(installed_list)
log "installing ${pkgs[*]} into a layer over $CHROOT (log: $dir/apt.log)"
install() { # install [APT-OPTION...]
	in_merged apt-get install -y --no-install-recommends -o Dpkg::Use-Pty=0 "$@" "${pkgs[@]}"
}
# The chroot's own packages come from trixie-backports where it has them
# (setup-vm-stack.sh), so a package whose trixie version needs older
# libraries than the chroot holds (linux-perf: libdebuginfod1t64 against
# the chroot's libelf1t64) installs with backports as the target release.
if ! install >"$tmp/apt.log" 2>&1; then
	# Package lists older than the mirror: refresh them once (in the layer).
	log "apt-get install failed; refreshing the package lists and trying again"
	if ! { in_merged apt-get update && install; } >>"$tmp/apt.log" 2>&1 &&
		! { log "apt-get install failed again; trying with trixie-backports as the target release" &&
			install -t trixie-backports >>"$tmp/apt.log" 2>&1; }; then
		tail -n 20 "$tmp/apt.log" >&2
		if grep -qE 'Temporary failure resolving|Could not resolve|Failed to fetch|Unable to connect|Network is unreachable' "$tmp/apt.log"; then
			die 4 "apt could not download ${pkgs[*]}: no network to the package mirror (apt's last lines above)"
		fi
		die 4 "apt-get install ${pkgs[*]} failed (apt's last lines above)"
	fi
fi
in_merged apt-get clean >>"$tmp/apt.log" 2>&1
after=$(installed_list)
for m in dev proc sys; do
	umount "$merged/$m"
done
umount "$merged"
# Whiteouts (deleted lower files: apt's caches) would reach the guests as
# character devices over 9p; the lower files they hid are harmless there.
find "$tmp/upper" -type c -delete
comm -13 <(echo "$before") <(echo "$after") >"$tmp/installed"
printf '%s\n' "${pkgs[@]}" >"$tmp/packages"
rm -rf -- "$dir"
mkdir -p "$dir"
mv "$tmp/upper" "$tmp/packages" "$tmp/installed" "$tmp/apt.log" "$dir/"
: >"$dir/done"
log "layer $dir: $(wc -l <"$dir/installed") packages installed, $(du -sh "$dir/upper" | cut -f1)"
sed 's/^/[guest-layer]   /' "$dir/installed" >&2
echo "$dir/upper"
