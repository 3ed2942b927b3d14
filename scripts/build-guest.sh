#!/usr/bin/env bash
# Build the ibtca guest artefacts inside the VM-stack chroot:
#   ibtca.ko            the guest module (guest-driver/kernel/), built against
#                       the chroot's headers (and the kernel verbs test
#                       modules, tests/kernel/, packed into the initramfs only)
#   ibtca-tool          static user-space tool (guest-driver/tools/)
#   initramfs.cpio.gz   busybox + /init (initramfs/) + ibtca.ko + ibtca-tool +
#                       the exec agent (initramfs/ibtca-agent.c, static, and
#                       its starter ibtca-guest-agent) + the RDMA
#                       core's modules (ib_core, ib_uverbs) + module groups
#                       for ibtca-load-modules (net: virtio-net, 9p, rxe:
#                       soft-RoCE, umad: ib_umad) + rdma-core's libibverbs, ibv_devices,
#                       ibv_devinfo, ibv_rc_pingpong, ibv_srq_pingpong, perftest, the rxe
#                       provider, opensm, infiniband-diags (smpquery, ibstat,
#                       ibnetdiscover, perfquery, ...) and iproute2's rdma with the libraries they
#                       link, and the ibtca rdma-core provider with
#                       ibtca-provider-test (scripts/build-provider.sh)
#                       (newc, gzip)
#   vmlinuz             copy of the chroot's guest kernel
#
#   scripts/build-guest.sh [OUTDIR]      # default $IBTCA_CACHE/guest
#   IBTCA_FORCE=1 scripts/build-guest.sh # rebuild even if inputs are unchanged
#
# Inputs are hashed (guest-driver/, this script, chroot-mounts.sh,
# build-provider.sh and its output, kernel version, the versions of the
# guest's packages); an unchanged hash with all
# outputs present is a no-op. The chroot
# is mounted for the build and unmounted afterwards, unless it was already
# mounted when we started (a VM may be using it).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
src=$root/guest-driver
# shellcheck source=scripts/chroot-mounts.sh
. "$here/chroot-mounts.sh"

log() { printf '[build-guest] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

CACHE=${IBTCA_CACHE:-$HOME/.cache/ibtca}
[ -r "$CACHE/stack.env" ] || die "$CACHE/stack.env missing: run scripts/setup-vm-stack.sh"
# shellcheck disable=SC1091
. "$CACHE/stack.env"
CHROOT=${IBTCA_CHROOT:?stack.env does not set IBTCA_CHROOT}
[ -d "$CHROOT" ] || die "chroot $CHROOT missing"
CHROOT=$(readlink -f "$CHROOT")
KVER=${IBTCA_KVER:-}
[ -n "$KVER" ] || KVER=$(cat "$CHROOT/.ibtca-kver")
[ -n "$KVER" ] || die "kernel version unknown"
[ -d "$CHROOT/usr/src/linux-headers-$KVER" ] || die "no headers for $KVER in the chroot"
[ -f "$CHROOT/boot/vmlinuz-$KVER" ] || die "no kernel image for $KVER in the chroot"

OUT=${1:-$CACHE/guest}
mkdir -p "$OUT"
OUT=$(readlink -f "$OUT")
outputs=(initramfs.cpio.gz ibtca.ko ibtca-tool vmlinuz)
# The RDMA core's modules, in load order (ibtca.ko needs ib_core).
ib_modules=(ib_core ib_uverbs_support ib_uverbs)
# User-space programs from the chroot's packages (setup-vm-stack.sh
# GUEST_PACKAGES); their libraries are found with ldd.
guest_bins=(/usr/bin/rdma /usr/bin/ibv_devices /usr/bin/ibv_devinfo
	/usr/bin/ibv_rc_pingpong /usr/bin/ibv_srq_pingpong /usr/bin/ibv_ud_pingpong
	/usr/bin/ib_write_bw /usr/bin/ib_read_bw /usr/bin/ib_send_bw /usr/bin/ib_atomic_bw
	/usr/bin/ib_write_lat /usr/bin/ib_read_lat /usr/bin/ib_send_lat
	/usr/sbin/opensm /usr/sbin/smpquery /usr/sbin/smpdump /usr/sbin/ibstat
	/usr/sbin/ibnetdiscover /usr/sbin/perfquery /usr/sbin/ibaddr /usr/sbin/iblinkinfo
	/usr/sbin/ibroute /usr/sbin/sminfo /usr/sbin/saquery /usr/sbin/ibping
	/usr/sbin/ibportstate /usr/sbin/ibtracert)
# Shell scripts from the same packages (busybox runs them; no ldd).
guest_scripts=(/usr/sbin/ibswitches /usr/sbin/ibhosts)
guest_pkgs=(libibverbs1 ibverbs-utils iproute2 perftest ibverbs-providers opensm infiniband-diags)
# libibverbs providers: /etc/libibverbs.d/NAME.driver and
# $libdir/libibverbs/libNAME-rdmav*.so (with what they link).
guest_providers=(rxe)
# Module groups for ibtca-load-modules (GROUP:MODULE...): each module with
# its dependencies, in load order, in /lib/modules/GROUP.modules.
module_groups=("net:virtio_net" "9p:9pnet_virtio 9p" "rxe:rdma_rxe ib_uverbs" "umad:ib_umad")

# Source files only: build products of an in-tree `make` are ignored.
input_files() {
	(cd "$src" && find . -type f \
		! -name '*.o' ! -name '*.ko' ! -name '*.mod' ! -name '*.mod.c' \
		! -name '*.cmd' ! -name 'modules.order' ! -name 'Module.symvers' \
		! -name '*.a' ! -path './tools/ibtca-tool' ! -path './.tmp*' \
		-print | LC_ALL=C sort)
}

inputs_hash() {
	{
		echo "kver=$KVER"
		stat -c 'vmlinuz %s %Y' "$CHROOT/boot/vmlinuz-$KVER"
		sha256sum "$here/build-guest.sh" "$here/chroot-mounts.sh" \
			"$here/build-provider.sh" | awk '{ print $1 }'
		echo "provider=$provider"
		chroot "$CHROOT" dpkg-query -W "${guest_pkgs[@]}" 2>&1
		input_files | while IFS= read -r f; do
			printf '%s %s\n' "$f" "$(sha256sum <"$src/$f" | awk '{ print $1 }')"
		done
	} | sha256sum | awk '{ print $1 }'
}

exec 9>"$OUT/.lock"
flock 9

# The rdma-core provider (cached by its own inputs: a no-op when built).
provider=$(bash "$here/build-provider.sh") || die "scripts/build-provider.sh failed"
hash=$(inputs_hash)
if [ -z "${IBTCA_FORCE:-}" ] && [ "$(cat "$OUT/.inputs.sha256" 2>/dev/null)" = "$hash" ]; then
	uptodate=1
	for f in "${outputs[@]}"; do
		[ -s "$OUT/$f" ] || uptodate=0
	done
	if [ "$uptodate" = 1 ]; then
		log "up to date in $OUT"
		exit 0
	fi
fi

ibtca_chroot_scratch "$CHROOT" ibtca-build

in_chroot() {
	chroot "$CHROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/root LC_ALL=C.UTF-8 "$@"
}

log "kernel $KVER, chroot $CHROOT, build dir $ibuild"
mkdir -p "$build/src"
input_files | (cd "$src" && tar -cf - --no-recursion -T -) | tar -xf - -C "$build/src"

jobs=$(nproc 2>/dev/null || echo 2)
log "building ibtca.ko"
in_chroot make -s -j"$jobs" -C "/usr/src/linux-headers-$KVER" M="$ibuild/src" modules >&2
vermagic=$(in_chroot modinfo -F vermagic "$ibuild/src/kernel/ibtca.ko")
case "$vermagic" in
"$KVER "*) ;;
*) die "ibtca.ko vermagic '$vermagic' does not match $KVER" ;;
esac

log "building ibtca-tool"
tool_srcs=()
for f in "$build"/src/tools/*.c; do # every tool source, as seen in the chroot
	tool_srcs+=("$ibuild/src/tools/${f##*/}")
done
in_chroot gcc -static -O2 -Wall -Wextra -I"$ibuild/src/include" \
	-o "$ibuild/ibtca-tool" "${tool_srcs[@]}"
if readelf -lW "$build/ibtca-tool" | grep -q 'program interpreter'; then
	die "ibtca-tool is not static"
fi
log "building ibtca-agent"
in_chroot gcc -static -O2 -Wall -Wextra -o "$ibuild/ibtca-agent" \
	"$ibuild/src/initramfs/ibtca-agent.c"

log "packing initramfs"
rootfs=$build/rootfs
mkdir -p "$rootfs"/{bin,sbin,usr/bin,usr/sbin,dev,proc,sys,tmp,root,etc,lib/modules}
cp "$CHROOT/usr/bin/busybox" "$rootfs/bin/busybox"
while IFS= read -r applet; do
	case "$applet" in
	bin/busybox | "") continue ;;
	esac
	mkdir -p "$rootfs/$(dirname "$applet")"
	ln -sf /bin/busybox "$rootfs/$applet"
done < <(in_chroot /usr/bin/busybox --list-full)
[ -L "$rootfs/bin/sh" ] || ln -s busybox "$rootfs/bin/sh"
install -m 0755 "$src/initramfs/init" "$rootfs/init"
install -m 0755 "$src/initramfs/ibtca-load-modules" "$rootfs/bin/ibtca-load-modules"
install -m 0755 "$src/initramfs/ibtca-guest-agent" "$rootfs/bin/ibtca-guest-agent"
install -m 0755 "$build/ibtca-agent" "$rootfs/bin/ibtca-agent"
# Without its debug sections (~2 MiB that the guest never reads and that
# cost boot time to unpack under TCG); $OUT/ibtca.ko keeps them.
in_chroot strip --strip-debug -o "$ibuild/rootfs/lib/modules/ibtca.ko" "$ibuild/src/kernel/ibtca.ko"
install -m 0644 "$build/src/tests/kernel/ibtca_kverbs_test.ko" \
	"$rootfs/lib/modules/ibtca_kverbs_test.ko"
install -m 0644 "$build/src/tests/kernel/ibtca_kverbs_srq.ko" \
	"$rootfs/lib/modules/ibtca_kverbs_srq.ko"
install -m 0644 "$build/src/tests/kernel/ibtca_kverbs_dbrec.ko" \
	"$rootfs/lib/modules/ibtca_kverbs_dbrec.ko"
install -m 0644 "$build/src/tests/kernel/ibtca_kverbs_seed.ko" \
	"$rootfs/lib/modules/ibtca_kverbs_seed.ko"
install -m 0755 "$build/ibtca-tool" "$rootfs/bin/ibtca-tool"
# The RDMA core's modules, decompressed: busybox's insmod hands the kernel
# the module's bytes, which the kernel decompresses only from a file.
for m in "${ib_modules[@]}"; do
	ko=$(in_chroot modinfo -k "$KVER" -n "$m") || die "no module $m for $KVER"
	case "$ko" in
	*.ko.xz) in_chroot sh -c "busybox unxz -c '$ko' >'$ibuild/rootfs/lib/modules/$m.ko'" ;;
	*.ko) cp "$CHROOT$ko" "$rootfs/lib/modules/$m.ko" ;;
	*) die "module $m: unexpected file $ko" ;;
	esac
done
# Module groups: `modprobe --show-depends` gives each module's
# dependencies in load order ("insmod PATH" lines; built-ins are skipped).
for group in "${module_groups[@]}"; do
	name=${group%%:*}
	: >"$rootfs/lib/modules/$name.modules"
	for m in ${group#*:}; do
		in_chroot modprobe -S "$KVER" --show-depends "$m" ||
			die "no module $m for $KVER"
	done | awk '$1 == "insmod" { print $2 }' | while IFS= read -r ko; do
		base=${ko##*/}
		base=${base%%.ko*}
		grep -qxF "$base" "$rootfs/lib/modules/$name.modules" && continue
		echo "$base" >>"$rootfs/lib/modules/$name.modules"
		[ -e "$rootfs/lib/modules/$base.ko" ] && continue
		case "$ko" in
		*.ko.xz) in_chroot sh -c "busybox unxz -c '$ko' >'$ibuild/rootfs/lib/modules/$base.ko'" ;;
		*.ko) cp "$CHROOT$ko" "$rootfs/lib/modules/$base.ko" ;;
		*) die "module $base: unexpected file $ko" ;;
		esac
	done
done
# libibverbs providers: the driver file and the library.
libdir=$(in_chroot sh -c 'dirname "$(readlink -f /usr/lib/*/libibverbs.so.1)"')
provider_libs=()
for p in "${guest_providers[@]}"; do
	install -D -m 0644 "$CHROOT/etc/libibverbs.d/$p.driver" "$rootfs/etc/libibverbs.d/$p.driver"
	found=0
	for so in "$CHROOT$libdir"/libibverbs/lib"$p"-rdmav*.so; do
		[ -e "$so" ] || continue
		install -D -m 0644 "$so" "$rootfs${so#"$CHROOT"}"
		provider_libs+=("${so#"$CHROOT"}")
		found=1
	done
	[ "$found" = 1 ] || die "provider $p: no $libdir/libibverbs/lib$p-rdmav*.so in the chroot"
done
# The ibtca provider where libibverbs looks for providers, and its test.
provider_dir=$libdir/libibverbs
install -D -m 0644 -t "$rootfs$provider_dir" "$provider"/libibtca-rdmav*.so
install -D -m 0644 "$provider/ibtca.driver" "$rootfs/etc/libibverbs.d/ibtca.driver"
install -D -m 0755 "$provider/ibtca-provider-test" "$rootfs/usr/bin/ibtca-provider-test"
# rdma-core, perftest and iproute2 programs, and the providers, with
# exactly the libraries they link (and those the ibtca provider links).
linked=()
for b in "${guest_bins[@]}" "${provider_libs[@]}"; do
	if [ ! -e "$rootfs$b" ]; then
		[ -x "$CHROOT$b" ] || die "$b missing in the chroot: run scripts/setup-vm-stack.sh"
		install -D -m 0755 "$CHROOT$b" "$rootfs$b"
	fi
	linked+=("$b")
done
for b in "${guest_scripts[@]}"; do
	[ -f "$CHROOT$b" ] || die "$b missing in the chroot: run scripts/setup-vm-stack.sh"
	install -D -m 0755 "$CHROOT$b" "$rootfs$b"
done
for f in "$rootfs$provider_dir"/libibtca-rdmav*.so "$rootfs/usr/bin/ibtca-provider-test"; do
	linked+=("${f#"$CHROOT"}")
done
for b in "${linked[@]}"; do
	in_chroot ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'
done | LC_ALL=C sort -u | while IFS= read -r lib; do
	# The file itself (its links resolved inside the chroot), under the
	# name the loader looks for.
	real=$(in_chroot readlink -f "$lib")
	mkdir -p "$rootfs$(dirname "$lib")"
	cp "$CHROOT$real" "$rootfs$lib"
done
# The kernel opens /dev/console before /init mounts devtmpfs.
mknod -m 0600 "$rootfs/dev/console" c 5 1
mknod -m 0666 "$rootfs/dev/null" c 1 3
in_chroot sh -c "cd '$ibuild/rootfs' && find . -print0 | LC_ALL=C sort -z |
	cpio --null -o -H newc -R 0:0 --quiet | gzip -9n >'$ibuild/initramfs.cpio.gz'"

rm -f "$OUT/.inputs.sha256"
for f in initramfs.cpio.gz ibtca-tool; do
	cp "$build/$f" "$OUT/.$f.tmp" && mv -f "$OUT/.$f.tmp" "$OUT/$f"
done
cp "$build/src/kernel/ibtca.ko" "$OUT/.ibtca.ko.tmp" && mv -f "$OUT/.ibtca.ko.tmp" "$OUT/ibtca.ko"
cp "$CHROOT/boot/vmlinuz-$KVER" "$OUT/.vmlinuz.tmp" && mv -f "$OUT/.vmlinuz.tmp" "$OUT/vmlinuz"
echo "$KVER" >"$OUT/kver"
echo "$hash" >"$OUT/.inputs.sha256"
log "done: $OUT (vermagic $vermagic)"
ls -l "${outputs[@]/#/$OUT/}" >&2
