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
#                       soft-RoCE, umad: ib_umad, overlay: overlayfs for
#                       ibtca-mount-root, the Debian-root guests, cm: rdma_cm,
#                       nvme-host: nvme_rdma, nvmet: nvmet_rdma and null_blk) +
#                       rdma-core's libibverbs, ibv_devices,
#                       ibv_devinfo, ibv_rc_pingpong, ibv_srq_pingpong, perftest, the rxe
#                       provider, opensm, infiniband-diags (smpquery, ibstat,
#                       ibnetdiscover, perfquery, ...), rdmacm-utils (rping,
#                       ucmatose, ...), nvme-cli, fio, iperf3 and
#                       iproute2's rdma with the libraries they
#                       link, and the ibtca rdma-core provider with
#                       ibtca-provider-test and ibtca-verbs (the libibverbs
#                       test commands, guest-driver/tools/verbs/;
#                       scripts/build-provider.sh)
#                       (newc, gzip)
#   vmlinuz             copy of the chroot's guest kernel
#
#   scripts/build-guest.sh [OUTDIR]      # default $IBTCA_CACHE/guest
#   IBTCA_FORCE=1 scripts/build-guest.sh # rebuild even if inputs are unchanged
#
# For a kernel of the user's own (docs/own-kernel.md; `ibtca-fabric up
# --kernel-tree` runs this), ibtca.ko is built against that kernel and the
# RDMA core's modules and the groups' come from it (a group whose modules
# it lacks is left out):
#
#   scripts/build-guest.sh --kernel-tree DIR [--tests] OUTDIR
#   scripts/build-guest.sh --kernel IMAGE --modules DIR [--tests] OUTDIR
#
# --tests also packs the kernel verbs test modules (always packed for the
# stack's kernel). Exit status 2: a bad argument; 1: a failed build.
#
# Inputs are hashed (guest-driver/, this script, chroot-mounts.sh,
# guest-kernel.sh, build-provider.sh and its output, kernel version, the versions of the
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
# shellcheck source=scripts/guest-kernel.sh
. "$here/guest-kernel.sh"

log() { printf '[build-guest] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

own_tree= own_image= own_modules= tests=1 OUT=
while [ $# -gt 0 ]; do
	case "$1" in
	--kernel-tree) [ $# -ge 2 ] || gk_die "$1 needs a value"; own_tree=$2; shift 2 ;;
	--kernel) [ $# -ge 2 ] || gk_die "$1 needs a value"; own_image=$2; shift 2 ;;
	--modules) [ $# -ge 2 ] || gk_die "$1 needs a value"; own_modules=$2; shift 2 ;;
	--tests) tests=2; shift ;;
	-*) gk_die "unknown option $1" ;;
	*) [ -z "$OUT" ] || gk_die "one OUTDIR only"; OUT=$1; shift ;;
	esac
done
if [ -n "$own_tree$own_image$own_modules" ]; then
	[ -z "$own_tree" ] || [ -z "$own_image$own_modules" ] ||
		gk_die "--kernel-tree or --kernel with --modules, not both"
	if [ -z "$own_tree" ] && { [ -z "$own_image" ] || [ -z "$own_modules" ]; }; then
		gk_die "--kernel and --modules go together"
	fi
	[ -n "$OUT" ] || gk_die "OUTDIR is required with an own kernel"
	[ "$tests" = 2 ] || tests=0
fi

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
in_chroot() {
	chroot "$CHROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/root LC_ALL=C.UTF-8 "$@"
}
if [ -n "$own_tree" ]; then
	gk_select_tree "$own_tree"
elif [ -n "$own_image" ]; then
	gk_select_image "$own_image" "$own_modules"
else
	[ -d "$CHROOT/usr/src/linux-headers-$KVER" ] || die "no headers for $KVER in the chroot"
	[ -f "$CHROOT/boot/vmlinuz-$KVER" ] || die "no kernel image for $KVER in the chroot"
	gk_select_stack "$KVER"
fi
KVER=$gk_kver

OUT=${OUT:-$CACHE/guest}
mkdir -p "$OUT"
OUT=$(readlink -f "$OUT")
outputs=(initramfs.cpio.gz ibtca.ko ibtca-tool vmlinuz)
# The RDMA core's module groups (/init loads them): ibcore, what ibtca.ko
# depends on (ib_core, and the module with ib_umem_get: ib_uverbs up to
# 7.1, ib_uverbs_support later; set once it is built), and uverbs, user
# verbs (ib_uverbs).
ib_groups=()
# User-space programs from the chroot's packages (setup-vm-stack.sh
# GUEST_PACKAGES); their libraries are found with ldd.
guest_bins=(/usr/bin/rdma /usr/bin/ibv_devices /usr/bin/ibv_devinfo
	/usr/bin/ibv_rc_pingpong /usr/bin/ibv_srq_pingpong /usr/bin/ibv_ud_pingpong
	/usr/bin/ib_write_bw /usr/bin/ib_read_bw /usr/bin/ib_send_bw /usr/bin/ib_atomic_bw
	/usr/bin/ib_write_lat /usr/bin/ib_read_lat /usr/bin/ib_send_lat
	/usr/sbin/opensm /usr/sbin/smpquery /usr/sbin/smpdump /usr/sbin/ibstat
	/usr/sbin/ibnetdiscover /usr/sbin/perfquery /usr/sbin/ibaddr /usr/sbin/iblinkinfo
	/usr/sbin/ibroute /usr/sbin/sminfo /usr/sbin/saquery /usr/sbin/ibping
	/usr/sbin/ibportstate /usr/sbin/ibtracert
	/usr/bin/rping /usr/bin/ucmatose /usr/bin/udaddy /usr/bin/mckey /usr/bin/rstream
	/usr/bin/riostream /usr/sbin/nvme /usr/bin/fio /usr/bin/iperf3)
# Shell scripts from the same packages (busybox runs them; no ldd).
guest_scripts=(/usr/sbin/ibswitches /usr/sbin/ibhosts)
guest_pkgs=(libibverbs1 ibverbs-utils iproute2 perftest ibverbs-providers opensm infiniband-diags
	rdmacm-utils nvme-cli fio iperf3)
# libibverbs providers: /etc/libibverbs.d/NAME.driver and
# $libdir/libibverbs/libNAME-rdmav*.so (with what they link).
guest_providers=(rxe)
# Module groups for ibtca-load-modules (GROUP:MODULE...): each module with
# its dependencies, in load order, in /lib/modules/GROUP.modules.
# The upper-layer protocols (docs/ulp.md): cm the RDMA connection manager
# (kernel and user space), nvme-host the NVMe over Fabrics RDMA host,
# nvmet its target with null_blk for a memory-backed namespace.
module_groups=("net:virtio_net" "9p:9pnet_virtio 9p" "rxe:rdma_rxe ib_uverbs" "umad:ib_umad" "overlay:overlay"
	"ipoib:ib_ipoib ib_cm" "cm:ib_cm rdma_cm rdma_ucm" "nvme-host:nvme_fabrics nvme_rdma"
	"nvmet:nvmet nvmet_rdma null_blk")

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
		gk_fingerprint
		echo "tests=$tests"
		sha256sum "$here/build-guest.sh" "$here/chroot-mounts.sh" \
			"$here/build-provider.sh" "$here/guest-kernel.sh" |
			awk '{ print $1 }'
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
trap 'gk_unexpose; _ibtca_scratch_cleanup' EXIT
gk_expose
gk_index

log "kernel $KVER, chroot $CHROOT, build dir $ibuild"
mkdir -p "$build/src"
input_files | (cd "$src" && tar -cf - --no-recursion -T -) | tar -xf - -C "$build/src"

jobs=$(nproc 2>/dev/null || echo 2)
mdir=$ibuild/src
[ "$tests" != 0 ] || mdir=$ibuild/src/kernel
log "building ibtca.ko"
# make fails with status 2, which here means a bad argument: a failed
# build is 1.
in_chroot make -s -j"$jobs" -C "$gk_kdir_in" M="$mdir" modules >&2 ||
	die "building ibtca.ko against $KVER ($gk_kdir) failed"
vermagic=$(in_chroot modinfo -F vermagic "$ibuild/src/kernel/ibtca.ko")
ibtca_deps=$(in_chroot modinfo -F depends "$ibuild/src/kernel/ibtca.ko")
ib_groups=("ibcore:ib_core ${ibtca_deps//,/ }" "uverbs:ib_uverbs")
case "$vermagic" in
"$KVER "*) ;;
*) die "ibtca.ko vermagic '$vermagic' does not match $KVER" ;;
esac

log "building ibtca-tool"
tool_srcs=()
for f in "$build"/src/tools/*.c; do # every tool source (not tools/verbs/), as seen in the chroot
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
install -m 0755 "$src/initramfs/ibtca-mount-root" "$rootfs/bin/ibtca-mount-root"
install -m 0755 "$src/initramfs/ibtca-guest-agent" "$rootfs/bin/ibtca-guest-agent"
install -m 0755 "$build/ibtca-agent" "$rootfs/bin/ibtca-agent"
# Without its debug sections (~2 MiB that the guest never reads and that
# cost boot time to unpack under TCG); $OUT/ibtca.ko keeps them.
in_chroot strip --strip-debug -o "$ibuild/rootfs/lib/modules/ibtca.ko" "$ibuild/src/kernel/ibtca.ko"
if [ "$tests" != 0 ]; then
	for m in ibtca_kverbs_test ibtca_kverbs_srq ibtca_kverbs_dbrec ibtca_kverbs_seed; do
		install -m 0644 "$build/src/tests/kernel/$m.ko" "$rootfs/lib/modules/$m.ko"
	done
fi
install -m 0755 "$build/ibtca-tool" "$rootfs/bin/ibtca-tool"
# Module groups: each module with its dependencies (modinfo's depends),
# dependencies first, built-ins left out. The RDMA core's groups are
# needed; an own kernel may lack another group's modules.
for group in "${ib_groups[@]}" "${module_groups[@]}"; do
	name=${group%%:*}
	# shellcheck disable=SC2086
	if ! list=$(gk_closure ${group#*:}); then
		case "$name" in
		ibcore | uverbs) die "kernel $KVER lacks the RDMA core's modules (group $name)" ;;
		esac
		[ "$gk_own" = 1 ] || die "no modules of group $name for $KVER"
		log "warning: kernel $KVER: module group $name left out"
		continue
	fi
	printf '%s\n' $list >"$rootfs/lib/modules/$name.modules"
	for m in $list; do
		[ -e "$rootfs/lib/modules/$m.ko" ] || gk_copy "$m" "$rootfs/lib/modules/$m.ko"
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
# The direct verbs' programs link the provider by its SONAME (ibtcadv.h).
ln -sf "libibverbs/$(basename "$provider"/libibtca-rdmav*.so)" "$rootfs$libdir/libibtca.so.1"
install -D -m 0755 "$provider/ibtcadv-test" "$rootfs/usr/bin/ibtcadv-test"
install -D -m 0755 "$provider/ibtcadv-bench" "$rootfs/usr/bin/ibtcadv-bench"
install -D -m 0755 "$provider/ibtca-verbs" "$rootfs/usr/bin/ibtca-verbs"
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
for f in "$rootfs$provider_dir"/libibtca-rdmav*.so "$rootfs/usr/bin/ibtca-provider-test" \
	"$rootfs/usr/bin/ibtcadv-test" "$rootfs/usr/bin/ibtcadv-bench" "$rootfs/usr/bin/ibtca-verbs"; do
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
cp "$gk_image" "$OUT/.vmlinuz.tmp" && mv -f "$OUT/.vmlinuz.tmp" "$OUT/vmlinuz"
echo "$KVER" >"$OUT/kver"
echo "$hash" >"$OUT/.inputs.sha256"
log "done: $OUT (vermagic $vermagic)"
ls -l "${outputs[@]/#/$OUT/}" >&2
