#!/usr/bin/env bash
# Build the ibtca rdma-core provider against the exact rdma-core version the
# guest image carries (the VM-stack chroot's libibverbs1), from Debian's
# source package of that version:
#   libibtca-rdmav<PABI>.so   the provider, for /usr/lib/<triplet>/libibverbs/
#   ibtca.driver              for /etc/libibverbs.d/
#   ibtca-provider-test       opens ibtca0 through the provider and checks
#                             the verbs it has (guest-driver/tests/provider/)
#   ibtcadv-test              the direct verbs (ibtcadv.h) between two guests
#                             (guest-driver/tests/provider/ibtcadv/)
#   ibtcadv-bench             DRDMA against ordinary RDMA WRITE and READ
#                             (guest-driver/tests/provider/ibtcadv_bench/)
#   ibtca-verbs               the guest test commands that use libibverbs
#                             (guest-driver/tools/verbs/)
#
#   scripts/build-provider.sh            # prints the output directory
#   IBTCA_FORCE=1 scripts/build-provider.sh
#
# Steps, inside the chroot: `apt-get source rdma-core=<version>` (the
# chroot's deb-src lines, scripts/setup-vm-stack.sh), guest-driver/provider/
# as providers/ibtca/ and guest-driver/include/ibtca_uverbs_abi.h as
# kernel-headers/rdma/ibtca-abi.h, both registered in the tree's CMakeLists;
# cmake with pyverbs and man pages off; ninja builds only the provider.
# Output: $IBTCA_CACHE/provider/<hash of the inputs>/; an unchanged hash is a
# no-op. The downloaded source is kept in $IBTCA_CACHE/provider/source/.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
gd=$root/guest-driver
# shellcheck source=scripts/chroot-mounts.sh
. "$here/chroot-mounts.sh"

log() { printf '[build-provider] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
	sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'
	exit 0
fi
[ $# -eq 0 ] || die "no arguments expected (see --help)"

CACHE=${IBTCA_CACHE:-$HOME/.cache/ibtca}
[ -r "$CACHE/stack.env" ] || die "$CACHE/stack.env missing: run scripts/setup-vm-stack.sh"
# shellcheck disable=SC1091
. "$CACHE/stack.env"
CHROOT=${IBTCA_CHROOT:?stack.env does not set IBTCA_CHROOT}
[ -d "$CHROOT" ] || die "chroot $CHROOT missing"
CHROOT=$(readlink -f "$CHROOT")

in_chroot() {
	chroot "$CHROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/root LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
}

# The rdma-core the guest image carries: libibverbs1's source and version.
version=$(chroot "$CHROOT" dpkg-query -W -f='${Version}' libibverbs1 2>/dev/null) ||
	die "libibverbs1 is not installed in the chroot: run scripts/setup-vm-stack.sh"
srcpkg=$(chroot "$CHROOT" dpkg-query -W -f='${source:Package}' libibverbs1)
for tool in cmake ninja dpkg-source patch; do
	chroot "$CHROOT" sh -c "command -v $tool" >/dev/null ||
		die "$tool missing in the chroot: run scripts/setup-vm-stack.sh (BUILD_PACKAGES)"
done
grep -q '^deb-src ' "$CHROOT/etc/apt/sources.list" ||
	die "the chroot has no deb-src lines: run scripts/setup-vm-stack.sh"

inputs=(include/ibtca_uverbs_abi.h include/ibtca_abi.h include/ibtca_regs.h include/ibtca_wqe.h
	include/ibtca_cqe.h include/ibtca_dv_ioctl.h provider tests/provider tools/verbs)
inputs_hash() {
	{
		echo "source=$srcpkg=$version"
		sha256sum "$here/build-provider.sh" | awk '{ print $1 }'
		(cd "$gd" && find "${inputs[@]}" -type f -print | LC_ALL=C sort |
			while IFS= read -r f; do
				printf '%s %s\n' "$f" "$(sha256sum <"$f" | awk '{ print $1 }')"
			done)
	} | sha256sum | awk '{ print $1 }'
}

mkdir -p "$CACHE/provider"
exec 9>"$CACHE/provider/.lock"
flock 9

hash=$(inputs_hash)
OUT=$CACHE/provider/$hash
if [ -z "${IBTCA_FORCE:-}" ] && [ -f "$OUT/.done" ]; then
	log "up to date: $OUT ($srcpkg $version)"
	echo "$OUT"
	exit 0
fi

ibtca_chroot_scratch "$CHROOT" ibtca-provider

t0=$(date +%s)
since() { echo "$(($(date +%s) - t0)) s"; }

# The source package's files and their SHA-256 from the chroot's Sources
# index (signed through the Release file apt checked).
uris=$(in_chroot sh -c "cd '$ibuild' && apt-get source -qq --print-uris '$srcpkg=$version'") ||
	die "apt-get source --print-uris $srcpkg=$version failed"
files=$(echo "$uris" | awk '$1 ~ /^'\''/ && $4 ~ /^SHA256:/ { print $2, substr($4, 8) }')
[ -n "$files" ] || die "no source files listed for $srcpkg=$version:
$uris"

# A file's SHA-256, or nothing if there is no such file.
file_sum() {
	if [ -f "$1" ]; then sha256sum "$1" | awk '{ print $1 }'; fi
}

srccache=$CACHE/provider/source/${srcpkg}_$version
fetched=1 # every tarball in the cache (a .dsc too, if the mirror had one)
while read -r name sum; do
	case "$name" in *.dsc) continue ;; esac
	[ "$(file_sum "$srccache/$name")" = "$sum" ] || fetched=0
done <<<"$files"
if [ "$fetched" = 1 ]; then
	log "source $srcpkg $version from $srccache"
	cp "$srccache"/* "$build/"
else
	log "fetching the source of $srcpkg $version"
	# A mirror without the .dsc still gives the tarballs: checked below.
	in_chroot sh -c "cd '$ibuild' && apt-get source -qq --download-only '$srcpkg=$version'" \
		>"$build/apt-source.log" 2>&1 || true
fi
dsc=
while read -r name sum; do
	got=$(file_sum "$build/$name")
	case "$name" in
	*.dsc)
		if [ "$got" = "$sum" ]; then
			dsc=$name
		else
			log "warning: the mirror gives no $name; unpacking the checked tarballs and applying debian/patches"
		fi
		;;
	*)
		[ "$got" = "$sum" ] || die "$name missing or not as the Sources index says:
$(cat "$build/apt-source.log" 2>/dev/null)"
		;;
	esac
done <<<"$files"
if [ "$fetched" = 0 ]; then
	mkdir -p "$srccache.tmp"
	while read -r name _; do
		if [ -f "$build/$name" ]; then cp "$build/$name" "$srccache.tmp/"; fi
	done <<<"$files"
	rm -rf "$srccache" && mv "$srccache.tmp" "$srccache"
fi

tree=$build/tree
itree=$ibuild/tree
if [ -n "$dsc" ]; then
	in_chroot dpkg-source -q -x "$ibuild/$dsc" "$itree" >&2
else
	orig=$(echo "$files" | awk '$1 ~ /\.orig\.tar\./ { print $1 }')
	deb=$(echo "$files" | awk '$1 ~ /\.debian\.tar\./ { print $1 }')
	[ -n "$orig" ] && [ -n "$deb" ] || die "no orig and debian tarballs in: $files"
	mkdir -p "$tree"
	tar -xf "$build/$orig" -C "$tree" --strip-components=1
	tar -xf "$build/$deb" -C "$tree"
	if [ -f "$tree/debian/patches/series" ]; then
		sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$tree/debian/patches/series" |
			while read -r p _; do
				in_chroot patch -s -d "$itree" -p1 -i "$itree/debian/patches/$p" ||
					die "debian/patches/$p does not apply"
			done
	fi
fi
log "source unpacked ($(since))"

# The provider and its kernel ABI header, registered in the tree; the
# device's headers (ibtca_abi.h, ibtca_regs.h) and the WQE builders and
# CQE readers shared with the kernel driver (ibtca_wqe.h, ibtca_cqe.h)
# beside the provider.
cp -r "$gd/provider" "$tree/providers/ibtca"
cp "$gd/include/ibtca_uverbs_abi.h" "$tree/kernel-headers/rdma/ibtca-abi.h"
# The device's ring formats and doorbell offsets, for the data path.
cp "$gd/include/ibtca_abi.h" "$gd/include/ibtca_regs.h" "$gd/include/ibtca_wqe.h" \
	"$gd/include/ibtca_cqe.h" "$gd/include/ibtca_dv_ioctl.h" "$tree/providers/ibtca/"
sed -i 's|^  rdma/efa-abi.h$|&\n  rdma/ibtca-abi.h|' "$tree/kernel-headers/CMakeLists.txt"
[ "$(grep -c '^  rdma/ibtca-abi.h$' "$tree/kernel-headers/CMakeLists.txt")" = 2 ] ||
	die "kernel-headers/CMakeLists.txt of $version: cannot register rdma/ibtca-abi.h"
sed -i 's|^add_subdirectory(providers/siw)$|&\nadd_subdirectory(providers/ibtca)|' "$tree/CMakeLists.txt"
grep -q '^add_subdirectory(providers/ibtca)$' "$tree/CMakeLists.txt" ||
	die "CMakeLists.txt of $version: cannot register providers/ibtca"
pabi=$(sed -n 's/^set(IBVERBS_PABI_VERSION "\([0-9]*\)")$/\1/p' "$tree/CMakeLists.txt")
[ -n "$pabi" ] || die "no IBVERBS_PABI_VERSION in rdma-core $version"

log "configuring rdma-core $version"
in_chroot cmake -S "$itree" -B "$itree/build" -G Ninja -Wno-dev \
	-DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
	-DCMAKE_INSTALL_SYSCONFDIR=/etc -DNO_PYVERBS=1 -DNO_MAN_PAGES=1 \
	>"$build/cmake.log" 2>&1 || {
	tail -n 40 "$build/cmake.log" >&2
	die "cmake failed"
}
log "configured ($(since)); building the provider (libibtca, ibtca-rdmav$pabi)"
in_chroot ninja -C "$itree/build" ibtca >"$build/ninja.log" 2>&1 || {
	tail -n 40 "$build/ninja.log" >&2
	die "the provider does not build"
}
# rdma-core's warning flags apply; the provider must not trip them.
if grep -A3 'providers/ibtca/.*warning:' "$build/ninja.log" >&2; then
	die "the provider compiles with warnings"
fi
so=$tree/build/lib/libibtca-rdmav$pabi.so
[ -f "$so" ] || die "ninja built no $so"
log "provider built ($(since))"

# The test program, against the tree's libibverbs (the guest's version).
mkdir -p "$build/provider-test"
cp "$gd"/tests/provider/*.[ch] "$build/provider-test/"
cp -r "$gd"/tests/provider/ibtcadv "$gd"/tests/provider/ibtcadv_bench "$build/provider-test/"
in_chroot sh -c "gcc -O2 -Wall -Wextra -Werror -I'$itree/build/include' \
	-o '$ibuild/ibtca-provider-test' '$ibuild'/provider-test/*.c \
	-L'$itree/build/lib' -libverbs" >&2 || die "ibtca-provider-test does not build"
# The direct verbs' test, linked to the provider as their users are.
in_chroot sh -c "gcc -O2 -Wall -Wextra -Werror -I'$itree/build/include' \
	-o '$ibuild/ibtcadv-test' '$ibuild'/provider-test/ibtcadv/*.c \
	-L'$itree/build/lib' -libtca -libverbs" >&2 || die "ibtcadv-test does not build"
in_chroot sh -c "gcc -O2 -Wall -Wextra -Werror -I'$itree/build/include' \
	-o '$ibuild/ibtcadv-bench' '$ibuild'/provider-test/ibtcadv_bench/*.c \
	-L'$itree/build/lib' -libtca -libverbs" >&2 || die "ibtcadv-bench does not build"

# The libibverbs test commands (ibtca-tool keeps the device's own).
mkdir -p "$build/verbs-tool"
cp "$gd"/tools/verbs/*.[ch] "$build/verbs-tool/"
in_chroot sh -c "gcc -O2 -Wall -Wextra -Werror -I'$itree/build/include' \
	-o '$ibuild/ibtca-verbs' '$ibuild'/verbs-tool/*.c \
	-L'$itree/build/lib' -libverbs" >&2 || die "ibtca-verbs does not build"

rm -rf "$OUT.tmp"
mkdir -p "$OUT.tmp"
cp "$so" "$build/ibtca-provider-test" "$build/ibtcadv-test" "$build/ibtcadv-bench" "$build/ibtca-verbs" "$OUT.tmp/"
echo "driver ibtca" >"$OUT.tmp/ibtca.driver"
echo "$srcpkg $version" >"$OUT.tmp/rdma-core.version"
touch "$OUT.tmp/.done"
rm -rf "$OUT" && mv "$OUT.tmp" "$OUT"
log "done in $(since): $OUT"
echo "$OUT"
