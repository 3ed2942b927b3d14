# shellcheck shell=bash
# The kernel a guest image is built for (scripts/build-guest.sh). Sourced,
# after chroot-mounts.sh, with $CHROOT set and in_chroot defined.
#
#   gk_select_stack KVER          the VM stack's kernel: the chroot's
#                                 /boot/vmlinuz-KVER, headers, /lib/modules/KVER
#   gk_select_tree DIR            a built kernel tree: DIR/arch/x86/boot/bzImage,
#                                 modules built in place (those the last make
#                                 built, its modules.order), DIR/.config
#   gk_select_image IMAGE MODDIR  a kernel image and its module directory
#                                 (/lib/modules/KVER style; MODDIR/build is
#                                 the tree or headers it was built with)
#
# Each sets gk_image, gk_kdir (the tree `make -C` builds modules against),
# gk_moddir (where the kernel's modules are found), gk_kver and gk_own
# (1 for a kernel that is not the stack's), all host paths; a bad argument
# exits 2. Then:
#
#   gk_expose        makes gk_kdir and gk_moddir visible in the chroot (read-only
#                    bind mounts at the same path for those outside it) and sets
#                    gk_kdir_in and gk_moddir_in; gk_unexpose undoes the mounts
#   gk_fingerprint   what identifies the kernel's build (for the input hash)
#   gk_index         finds every module file under gk_moddir
#   gk_closure M...  the modules M and their dependencies, dependencies first,
#                    one per line; built-in ones are left out; fails naming a
#                    module that is neither a module file nor built in
#   gk_copy M FILE   module M's object, decompressed, as FILE (busybox's insmod
#                    hands the kernel the bytes, which it decompresses only
#                    from a file)

gk_die() {
	printf '[build-guest] error: %s\n' "$*" >&2
	exit 2
}

# Host path $1 with its links resolved as the guest's tools see them: inside
# the chroot relative to the chroot's root, elsewhere on the host.
gk_resolve() {
	local p
	p=$(readlink -m "$1")
	case "$p" in
	"$CHROOT"/*) printf '%s%s\n' "$CHROOT" "$(chroot "$CHROOT" readlink -m "${p#"$CHROOT"}")" ;;
	*) printf '%s\n' "$p" ;;
	esac
}

gk_release_of() { # the kernel release a build tree was configured for
	local f=$1/include/config/kernel.release
	[ -s "$f" ] || gk_die "$1 has no include/config/kernel.release: not a configured, built kernel tree"
	cat "$f"
}

gk_select_stack() {
	gk_own=0
	gk_tree=
	gk_kver=$1
	gk_image=$CHROOT/boot/vmlinuz-$1
	gk_kdir=$CHROOT/usr/src/linux-headers-$1
	gk_moddir=$CHROOT/lib/modules/$1
}

gk_select_tree() {
	[ -d "$1" ] || gk_die "--kernel-tree $1: no such directory"
	gk_own=1
	gk_tree=1
	gk_kdir=$(gk_resolve "$1")
	gk_moddir=$gk_kdir
	gk_image=$gk_kdir/arch/x86/boot/bzImage
	[ -f "$gk_image" ] || gk_die "--kernel-tree $1: no arch/x86/boot/bzImage (run make there first)"
	[ -f "$gk_kdir/.config" ] || gk_die "--kernel-tree $1: no .config"
	gk_kver=$(gk_release_of "$gk_kdir")
	[ -f "$gk_kdir/modules.order" ] ||
		gk_die "--kernel-tree $1: no modules.order (run make modules there first)"
}

gk_select_image() {
	[ -f "$1" ] || gk_die "--kernel $1: no such file"
	[ -d "$2" ] || gk_die "--modules $2: no such directory"
	gk_own=1
	gk_tree=
	gk_image=$(readlink -f "$1")
	gk_moddir=$(gk_resolve "$2")
	[ -e "$gk_moddir/build" ] || gk_die "--modules $2: no build/ (the kernel's tree or headers)"
	gk_kdir=$(gk_resolve "$gk_moddir/build")
	[ -f "$gk_kdir/.config" ] || gk_die "--modules $2: $gk_kdir has no .config"
	gk_kver=$(gk_release_of "$gk_kdir")
}

gk_mounts=()
gk_made=()

# Sets gk_in to path $1 (a host path) as seen in the chroot; bind-mounts
# it read-only at the same path when it is outside (in this shell, not a
# subshell: gk_unexpose undoes the mounts it records).
gk_visible() {
	local p=$1 top
	case "$p" in
	"$CHROOT"/*)
		gk_in=${p#"$CHROOT"}
		return
		;;
	esac
	if ! mountpoint -q "$CHROOT$p"; then
		top=$CHROOT$p
		while [ ! -e "$(dirname "$top")" ]; do top=$(dirname "$top"); done
		[ -e "$top" ] || gk_made+=("$top")
		mkdir -p "$CHROOT$p"
		mount --bind "$p" "$CHROOT$p"
		gk_mounts+=("$CHROOT$p")
		mount -o remount,bind,ro "$CHROOT$p"
	fi
	gk_in=$p
}

gk_expose() {
	gk_visible "$gk_kdir"
	gk_kdir_in=$gk_in
	gk_visible "$gk_moddir"
	gk_moddir_in=$gk_in
	# A tree built with O=: its Makefile includes the source tree's.
	if [ -L "$gk_kdir/source" ]; then
		gk_visible "$(gk_resolve "$gk_kdir/source")"
	fi
}

gk_unexpose() {
	local m i
	for m in "${gk_mounts[@]}"; do
		umount "$m" 2>/dev/null || umount -l "$m" || true
	done
	gk_mounts=()
	for ((i = ${#gk_made[@]} - 1; i >= 0; i--)); do
		# Only the empty directories made for the mounts.
		find "${gk_made[i]}" -depth -type d -empty -delete 2>/dev/null || true
	done
	gk_made=()
}

gk_fingerprint() {
	echo "kernel=$gk_kver own=$gk_own"
	stat -c 'image %s %Y' "$gk_image"
	[ "$gk_own" = 1 ] || return 0
	for f in .config Module.symvers; do
		[ -f "$gk_kdir/$f" ] && sha256sum <"$gk_kdir/$f"
	done
	gk_module_files | LC_ALL=C sort | xargs -r stat -c '%n %s %Y' | sha256sum
}

# The kernel's module files. In a tree, those of its modules.order (`make`
# lists there the modules it built, as DIR/.o, and leaves the .ko of
# modules since built in or configured out in place); in a module
# directory, every one (modules.order there misses those installed later).
gk_module_files() {
	local o
	if [ -n "${gk_tree:-}" ]; then
		while IFS= read -r o; do
			o=${o%.o}
			o=${o%.ko}
			[ ! -f "$gk_moddir/$o.ko" ] || printf '%s\n' "$gk_moddir/$o.ko"
		done <"$gk_moddir/modules.order"
		return
	fi
	find "$gk_moddir" -type f \( -name '*.ko' -o -name '*.ko.xz' \
		-o -name '*.ko.gz' -o -name '*.ko.zst' \)
}

gk_name() { # module name of a file or name: no suffix, '-' as '_'
	_gk_name "$1"
	printf '%s\n' "$gk_n"
}

_gk_name() { # gk_name's answer in gk_n (no subshell: gk_index names thousands)
	local b=${1##*/}
	b=${b%%.ko*}
	gk_n=${b//-/_}
}

declare -A gk_files=()
declare -A gk_builtin=()
gk_index() {
	local f
	gk_files=()
	gk_builtin=()
	while IFS= read -r f; do
		_gk_name "$f"
		[ -n "${gk_files[$gk_n]:-}" ] || gk_files[$gk_n]=$f
	done < <(gk_module_files | LC_ALL=C sort)
	if [ -f "$gk_moddir/modules.builtin" ]; then
		while IFS= read -r f; do
			_gk_name "$f"
			gk_builtin[$gk_n]=1
		done <"$gk_moddir/modules.builtin"
	fi
}

declare -A gk_seen=()
gk_closure() {
	gk_seen=()
	local m
	for m in "$@"; do
		_gk_visit "$(gk_name "$m")" || return
	done
}

_gk_visit() {
	local m=$1 f deps d
	[ -z "${gk_seen[$m]:-}" ] || return 0
	gk_seen[$m]=1
	f=${gk_files[$m]:-}
	if [ -z "$f" ]; then
		[ -n "${gk_builtin[$m]:-}" ] && return 0
		printf '[build-guest] kernel %s: module %s is neither built as a module under %s nor built in\n' \
			"$gk_kver" "$m" "$gk_moddir" >&2
		return 1
	fi
	deps=$(in_chroot modinfo -F depends "${f#"$CHROOT"}") || return
	for d in ${deps//,/ }; do
		_gk_visit "$(gk_name "$d")" || return
	done
	printf '%s\n' "$m"
}

gk_copy() {
	local f=${gk_files[$1]} in
	in=${f#"$CHROOT"}
	case "$f" in
	*.ko) cp "$f" "$2" ;;
	*.ko.xz) in_chroot sh -c "busybox unxz -c '$in'" >"$2" ;;
	*.ko.gz) in_chroot sh -c "busybox gunzip -c '$in'" >"$2" ;;
	*.ko.zst) in_chroot sh -c "zstd -qdc '$in'" >"$2" ;;
	esac
}
