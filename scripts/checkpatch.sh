#!/usr/bin/env bash
# Kernel-style check of the guest driver with the kernel's own checkpatch.pl,
# taken from Debian's linux-source package of the guest kernel's version and
# cached in $IBTCA_CACHE/checkpatch (about 170 MB downloaded once).
#
#   scripts/checkpatch.sh            # check guest-driver/ (exit 1 on errors or warnings)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/chroot-mounts.sh"
CACHE=${IBTCA_CACHE:-$HOME/.cache/ibtca}
. "$CACHE/stack.env"
dir=$CACHE/checkpatch
cp=$dir/scripts/checkpatch.pl

if [ ! -f "$cp" ]; then
	major_minor=$(echo "$IBTCA_KVER" | sed -n 's/^\([0-9]*\.[0-9]*\).*/\1/p')
	pkg=linux-source-$major_minor
	echo "[checkpatch] fetching checkpatch.pl from $pkg" >&2
	work=$(mktemp -d "$IBTCA_CHROOT/tmp/checkpatch.XXXXXX")
	trap 'rm -rf "$work"; ibtca_chroot_release "$IBTCA_CHROOT"' EXIT
	ibtca_chroot_mount "$IBTCA_CHROOT"
	chroot "$IBTCA_CHROOT" sh -c "cd ${work#"$IBTCA_CHROOT"} && apt-get download -qq $pkg" >&2
	mkdir -p "$dir.partial"
	dpkg-deb --fsys-tarfile "$work"/"$pkg"_*.deb |
		tar -xO --wildcards './usr/src/linux-source-*.tar.xz' |
		tar -xJ -C "$dir.partial" --strip-components=1 --wildcards \
			'*/scripts/checkpatch.pl' '*/scripts/spelling.txt' '*/scripts/const_structs.checkpatch'
	rm -rf "$dir"
	mv "$dir.partial" "$dir"
fi

cd "$root/guest-driver"
# --no-tree makes checkpatch look for a tree it does not need; drop that noise.
check() { perl "$cp" --no-tree --terse --show-types "$@" 2> >(grep -v -e 'uninitialized value \$root' -e "find: '/include'" -e "find: ‘/include’" >&2); }
rc=0
# Every driver source and header but the generated include/ibtca_regs.h and
# include/ibtca_abi.h. The uapi headers, the tool and the rdma-core provider
# are user-space C: no --strict (kernel types, BIT()); the kernel files get
# --strict.
kernel=(kernel/*.c kernel/*.h tests/kernel/*.c tests/kernel/*.h)
# tests/provider/ holds one folder per guest test program (ibtcadv/, ...).
shopt -s globstar
user=(tools/**/*.c tools/**/*.h provider/*.c provider/*.h tests/provider/**/*.c tests/provider/**/*.h)
for f in include/*.h; do
	case $f in
	include/ibtca_regs.h | include/ibtca_abi.h) ;;
	include/ibtca_uapi.h | include/ibtca_uverbs_abi.h) user+=("$f") ;;
	*) kernel+=("$f") ;;
	esac
done
# kernel/ibtca_compat.h holds the version checks an out-of-tree module
# needs to build on more than one kernel series: the LINUX_VERSION_CODE
# warnings (and the comparisons they start with) are what it is for.
compat=kernel/ibtca_compat.h
for i in "${!kernel[@]}"; do
	[ "${kernel[i]}" != "$compat" ] || unset 'kernel[i]'
done
check --strict -f "${kernel[@]}" || rc=1
check --strict --ignore LINUX_VERSION_CODE,CONSTANT_COMPARISON -f "$compat" || rc=1
# User-space C has no <linux/compiler_attributes.h>: __aligned() and
# __printf() are not there to prefer over __attribute__.
check --ignore PREFER_DEFINED_ATTRIBUTE_MACRO -f "${user[@]}" || rc=1
rm -f .checkpatch-camelcase.*
exit $rc
