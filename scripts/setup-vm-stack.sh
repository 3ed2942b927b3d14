#!/usr/bin/env bash
# Install the VM test stack (QEMU with vfio-user-pci, a guest kernel and its
# headers, busybox, a compiler for the guest module and tool, and the guest
# image's RDMA user space: libibverbs, ibverbs-utils, iproute2's `rdma`, and
# what building the rdma-core provider needs: deb-src lines and the build
# dependencies) into a cache outside the clone, unattended and idempotently.
#
#   scripts/setup-vm-stack.sh            # install (or reuse) the stack
#   scripts/setup-vm-stack.sh --print    # print the resolved settings
#
# Cache: $IBTCA_CACHE (default ~/.cache/ibtca). The result is described by
# $IBTCA_CACHE/stack.env, which scripts/vm-env.sh sources.
#
# If the host already has a QEMU >= 10.1.1 whose `-device help` lists
# vfio-user-pci *and* a guest kernel with headers is given through
# IBTCA_KERNEL / IBTCA_KDIR, the host stack is used. Otherwise a Debian trixie
# chroot with trixie-backports is built in the cache (about 70 s, 1.2 GB).
# The chroot has two guest kernels: trixie-backports' (IBTCA_KVER, the
# bundled guest's) and Debian stable's (IBTCA_KVER_STABLE, which
# tests/tests/vm_own_kernel.rs boots as an own kernel), both with headers.
set -euo pipefail

CACHE=${IBTCA_CACHE:-$HOME/.cache/ibtca}
CHROOT=$CACHE/chroot
STAMP=$CHROOT/.ibtca-stack-ready
ENVFILE=$CACHE/stack.env
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/chroot-mounts.sh
. "$here/chroot-mounts.sh"

log() { printf '[setup-vm-stack] %s\n' "$*" >&2; }

# Debian packages whose binaries and libraries build-guest.sh copies into
# the guest image (by name, from the chroot's trixie).
GUEST_PACKAGES=(libibverbs1 ibverbs-utils ibverbs-providers perftest iproute2 opensm infiniband-diags
	rdmacm-utils nvme-cli fio iperf3)
# What scripts/build-provider.sh needs to fetch rdma-core's Debian source
# (dpkg-dev unpacks it) and to configure and build one provider of it
# (pyverbs and man pages off: no cython, no pandoc).
BUILD_PACKAGES=(dpkg-dev cmake ninja-build pkgconf libnl-3-dev libnl-route-3-dev
	libudev-dev python3)
# What scripts/kernel-style.sh runs besides checkpatch.pl: sparse.
STYLE_PACKAGES=(sparse)

# The Debian mirror this machine already uses (deb822 or one-line sources).
host_mirror() {
	local m=""
	if compgen -G '/etc/apt/sources.list.d/*.sources' >/dev/null; then
		m=$(awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i ~ /\/debian\/?$/) { print $i; exit } }' \
			/etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1)
	fi
	if [ -z "$m" ] && [ -f /etc/apt/sources.list ]; then
		m=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\// && $i ~ /\/debian\/?$/) { print $i; exit } }' \
			/etc/apt/sources.list | head -n1)
	fi
	[ -n "$m" ] || { log "no Debian mirror found in /etc/apt sources"; exit 1; }
	echo "${m%/}"
}

version_ge() { # version_ge A B: A >= B
	[ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]
}

host_qemu_ok() {
	command -v qemu-system-x86_64 >/dev/null || return 1
	local v
	v=$(qemu-system-x86_64 --version | sed -n 's/.*version \([0-9.]*\).*/\1/p' | head -n1)
	version_ge "$v" 10.1.1 || return 1
	qemu-system-x86_64 -device help 2>/dev/null | grep -q '"vfio-user-pci"'
}

apt_host_install() {
	local missing=()
	for p in "$@"; do
		dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	log "installing host packages: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

write_env() {
	mkdir -p "$CACHE"
	cat >"$ENVFILE.tmp" <<EOF
# written by scripts/setup-vm-stack.sh
IBTCA_STACK=$1
IBTCA_CHROOT=$2
IBTCA_KVER=$3
IBTCA_KVER_STABLE=${4:-}
EOF
	mv "$ENVFILE.tmp" "$ENVFILE"
}

build_chroot() {
	local mirror kver tmp
	mirror=$(host_mirror)
	apt_host_install debootstrap ca-certificates
	if [ -d "$CHROOT" ] && [ ! -f "$STAMP" ]; then
		log "removing an incomplete chroot"
		ibtca_chroot_umount "$CHROOT"
		ibtca_chroot_assert_unmounted "$CHROOT"
		rm -rf --one-file-system "$CHROOT"
	fi
	tmp=$CACHE/chroot.partial
	if [ -d "$tmp" ]; then
		ibtca_chroot_umount "$tmp"
		ibtca_chroot_assert_unmounted "$tmp"
		rm -rf --one-file-system "$tmp"
	fi
	mkdir -p "$CACHE"
	log "debootstrap trixie from $mirror (about a minute)"
	debootstrap --variant=minbase trixie "$tmp" "$mirror" >"$CACHE/debootstrap.log" 2>&1 || {
		tail -n 30 "$CACHE/debootstrap.log" >&2
		exit 1
	}
	cat >"$tmp/etc/apt/sources.list" <<EOF
deb $mirror trixie main
deb $mirror trixie-backports main
EOF
	add_deb_src "$tmp" || true
	trap 'ibtca_chroot_umount "$tmp"' EXIT
	ibtca_chroot_mount "$tmp"
	chroot "$tmp" apt-get update -qq
	kver=$(chroot "$tmp" apt-cache show linux-image-amd64 |
		sed -n 's/^Depends: .*linux-image-\([0-9][^ ,]*-amd64\).*/\1/p' | sort -V | tail -n1)
	[ -n "$kver" ] || { log "cannot read the kernel version from linux-image-amd64"; exit 1; }
	kstable=$(stable_kver "$tmp")
	log "installing QEMU and guest kernels $kver (trixie-backports) and $kstable (trixie)"
	# One install: split installs end in "held broken packages".
	chroot "$tmp" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		--no-install-recommends -t trixie-backports \
		qemu-system-x86 "linux-image-$kver" "linux-headers-$kver" \
		"linux-image-$kstable" "linux-headers-$kstable" \
		gcc make libc6-dev busybox-static cpio "${GUEST_PACKAGES[@]}" \
		"${BUILD_PACKAGES[@]}" "${STYLE_PACKAGES[@]}" \
		>"$CACHE/apt.log" 2>&1 || {
		tail -n 30 "$CACHE/apt.log" >&2
		exit 1
	}
	chroot "$tmp" apt-get clean
	ibtca_chroot_umount "$tmp"
	trap - EXIT
	echo "$kver" >"$tmp/.ibtca-kver"
	echo "$kstable" >"$tmp/.ibtca-kver-stable"
	touch "$tmp/.ibtca-stack-ready"
	mv "$tmp" "$CHROOT"
	write_env chroot "$CHROOT" "$kver" "$kstable"
}

# The kernel release of Debian stable's linux-image-amd64 in chroot $1.
stable_kver() {
	local k
	k=$(chroot "$1" apt-cache show linux-image-amd64/trixie |
		sed -n 's/^Depends: .*linux-image-\([0-9][^ ,]*-amd64\).*/\1/p' | head -n1)
	[ -n "$k" ] || { log "cannot read stable's kernel version from linux-image-amd64/trixie"; exit 1; }
	echo "$k"
}

# A deb-src line beside each of chroot $1's deb lines that has none (the
# same mirror, suite and components), so `apt-get source` works; returns 1
# if it added any.
add_deb_src() {
	local list=$1/etc/apt/sources.list added=0 line
	while IFS= read -r line; do
		case "$line" in
		"deb "*) ;;
		*) continue ;;
		esac
		grep -qxF "deb-src ${line#deb }" "$list" && continue
		echo "deb-src ${line#deb }" >>"$list"
		added=1
	done < <(cat "$list")
	[ "$added" = 0 ]
}

# A chroot made before GUEST_PACKAGES or BUILD_PACKAGES grew, or before it
# had deb-src lines: add what it lacks (trixie's versions, as a new chroot
# gets them).
chroot_packages() {
	local missing=() p update=0 kstable=
	add_deb_src "$CHROOT" || update=1
	# deb-src lines whose index an earlier run failed to fetch.
	compgen -G "$CHROOT/var/lib/apt/lists/*_Sources*" >/dev/null || update=1
	for p in "${GUEST_PACKAGES[@]}" "${BUILD_PACKAGES[@]}" "${STYLE_PACKAGES[@]}"; do
		chroot "$CHROOT" dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
			grep -q 'install ok installed' || missing+=("$p")
	done
	# Debian stable's kernel, in a chroot made before it was part of the stack.
	if [ ! -s "$CHROOT/.ibtca-kver-stable" ]; then
		kstable=$(stable_kver "$CHROOT")
		missing+=("linux-image-$kstable" "linux-headers-$kstable")
	fi
	[ ${#missing[@]} -eq 0 ] && [ "$update" = 0 ] && return 0
	ibtca_chroot_mount "$CHROOT"
	trap 'ibtca_chroot_release "$CHROOT"' EXIT
	if [ ${#missing[@]} -eq 0 ]; then
		log "deb-src lines added: updating the chroot's package lists"
		chroot "$CHROOT" apt-get update -qq >>"$CACHE/apt.log" 2>&1 || {
			tail -n 30 "$CACHE/apt.log" >&2
			exit 1
		}
	else
		log "installing packages into the chroot: ${missing[*]}"
		{
			chroot "$CHROOT" apt-get update -qq &&
				chroot "$CHROOT" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
					--no-install-recommends "${missing[@]}" &&
				chroot "$CHROOT" apt-get clean
		} >>"$CACHE/apt.log" 2>&1 || {
			tail -n 30 "$CACHE/apt.log" >&2
			exit 1
		}
	fi
	[ -z "$kstable" ] || echo "$kstable" >"$CHROOT/.ibtca-kver-stable"
	ibtca_chroot_release "$CHROOT"
	trap - EXIT
}

main() {
	if [ "${1:-}" = "--print" ]; then
		[ -f "$ENVFILE" ] && cat "$ENVFILE"
		echo "IBTCA_CACHE=$CACHE"
		return 0
	fi
	if [ "$(id -u)" -ne 0 ]; then
		log "needs root (debootstrap, chroot, apt-get)"
		exit 1
	fi
	if host_qemu_ok && [ -n "${IBTCA_KERNEL:-}" ] && [ -n "${IBTCA_KDIR:-}" ]; then
		log "using the host's QEMU and IBTCA_KERNEL=$IBTCA_KERNEL"
		write_env host "" host
		return 0
	fi
	if [ -f "$STAMP" ]; then
		chroot_packages
		log "stack ready in $CHROOT (kernel $(cat "$CHROOT/.ibtca-kver"))"
		write_env chroot "$CHROOT" "$(cat "$CHROOT/.ibtca-kver")" \
			"$(cat "$CHROOT/.ibtca-kver-stable")"
		return 0
	fi
	build_chroot
	log "stack ready in $CHROOT"
}

main "$@"
