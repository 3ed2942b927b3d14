#!/usr/bin/env bash
# Boot a guest with one or more ibtca devices (vfio-user-pci) under the QEMU of
# the VM-stack chroot. The serial console goes to stdout.
#
#   scripts/run-vm.sh --socket HOSTPATH [--socket2 HOSTPATH ...] \
#       --kernel F --initrd F --append "ibtca.mode=foundation" \
#       [--mem 512M] [--smp N] [--cpu-affinity CPUS] [--nice N] [--timeout SECS] \
#       [--timeout-signal TERM|KILL] \
#       [--accel auto|tcg|kvm] [--serial-log FILE [--serial-socket SOCK]] \
#       [--no-device] [-- QEMU-ARGS...]
#
# --serial-socket SOCK (with --serial-log, both inside the chroot): the serial
# console is also served on the Unix socket SOCK (one client at a time, e.g.
# `ibtca-fabric console`), QEMU still writing all of it to the log file.
#
# --socket may be repeated (same as --socket2, --socket3, ...): device N gets
# id tcaN-1. Sockets must live inside the chroot tree (QEMU runs chrooted);
# kernel and initrd outside it are hard-linked or copied into the chroot's
# /tmp for the run. console=ttyS0, panic=-1 and no_timer_check are added to
# --append unless it already sets them (no_timer_check: under TCG on a
# loaded host the kernel's IO-APIC timer check can miss its ticks and panic,
# "IO-APIC + timer doesn't work!", before the console says much). --no-device boots without any ibtca device. --nice N
# runs QEMU at niceness N (-20..19; raising it needs no privilege): at 19 the
# device's threads, woken, preempt a busy-polling vCPU on their CPU at once.
#
# The chroot is mounted (idempotently) and left mounted: several VMs may run
# at once, so the caller unmounts (ibtca_chroot_umount from chroot-mounts.sh).
# Exit status: QEMU's, or 124 when --timeout expired (QEMU is sent
# --timeout-signal, default TERM; KILL simulates a QEMU crash).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/chroot-mounts.sh
. "$here/chroot-mounts.sh"

log() { printf '[run-vm] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 2; }

usage() {
	sed -n '2,/^set -euo/{ /^set -euo/d; s/^# \{0,1\}//; p; }' "$0" >&2
	exit 2
}

sockets=()
kernel=
initrd=
append=
mem=512M
smp=1
affinity=
niceness=
tmo=120
tsig=TERM
accel=${IBTCA_ACCEL:-auto}
serial_log=
serial_socket=
no_device=0
extra=()

need() { [ $# -ge 2 ] || die "$1 needs an argument"; }
while [ $# -gt 0 ]; do
	case "$1" in
	--socket | --socket[0-9]*) need "$@"; sockets+=("$2"); shift 2 ;;
	--kernel) need "$@"; kernel=$2; shift 2 ;;
	--initrd) need "$@"; initrd=$2; shift 2 ;;
	--append) need "$@"; append=$2; shift 2 ;;
	--mem) need "$@"; mem=$2; shift 2 ;;
	--smp) need "$@"; smp=$2; shift 2 ;;
	--cpu-affinity) need "$@"; affinity=$2; shift 2 ;;
	--nice) need "$@"; niceness=$2; shift 2 ;;
	--timeout) need "$@"; tmo=$2; shift 2 ;;
	--timeout-signal) need "$@"; tsig=$2; shift 2 ;;
	--accel) need "$@"; accel=$2; shift 2 ;;
	--serial-log) need "$@"; serial_log=$2; shift 2 ;;
	--serial-socket) need "$@"; serial_socket=$2; shift 2 ;;
	--no-device) no_device=1; shift ;;
	-h | --help) usage ;;
	--) shift; extra=("$@"); break ;;
	*) die "unknown argument '$1' (see --help)" ;;
	esac
done

if [ -n "$niceness" ]; then
	[[ "$niceness" =~ ^-?[0-9]+$ ]] && [ "$niceness" -ge -20 ] && [ "$niceness" -le 19 ] ||
		die "--nice needs a niceness in -20..19, not '$niceness'"
fi
[ -n "$kernel" ] || die "--kernel is required"
[ -n "$initrd" ] || die "--initrd is required"
[ -f "$kernel" ] || die "kernel $kernel not found"
[ -f "$initrd" ] || die "initrd $initrd not found"
if [ "$no_device" = 1 ]; then
	sockets=()
elif [ ${#sockets[@]} -eq 0 ]; then
	die "--socket is required (or --no-device)"
fi
[[ "$mem" =~ ^[0-9]+[KMGT]?$ ]] || die "bad --mem '$mem'"
[[ "$smp" =~ ^[1-9][0-9]*$ ]] || die "bad --smp '$smp'"
[[ "$tmo" =~ ^[1-9][0-9]*$ ]] || die "bad --timeout '$tmo'"
# Plain numbers are MiB for QEMU's -m but bytes for the memfd backend.
[[ "$mem" =~ [KMGT]$ ]] || mem=${mem}M

CACHE=${IBTCA_CACHE:-$HOME/.cache/ibtca}
[ -r "$CACHE/stack.env" ] || die "$CACHE/stack.env missing: run scripts/setup-vm-stack.sh"
# shellcheck disable=SC1091
. "$CACHE/stack.env"
CHROOT=${IBTCA_CHROOT:?stack.env does not set IBTCA_CHROOT}
CHROOT=$(readlink -f "$CHROOT")
[ -x "$CHROOT/usr/bin/qemu-system-x86_64" ] || die "no qemu-system-x86_64 in $CHROOT"

# Host path under the chroot -> path as QEMU sees it; empty if outside.
to_chroot() {
	local p
	p=$(readlink -m "$1")
	case "$p" in
	"$CHROOT"/*) printf '%s\n' "${p#"$CHROOT"}" ;;
	*) printf '\n' ;;
	esac
}

rundir=
cleanup() {
	# A plain directory we created under the chroot's /tmp.
	case "$rundir" in
	"$CHROOT"/tmp/ibtca-run.*) rm -rf -- "$rundir" ;;
	esac
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Kernel and initrd must be visible inside the chroot. stage F sets $staged
# (not run in a subshell, so that $rundir is remembered for cleanup).
staged=
stage() {
	local f=$1 dst
	staged=$(to_chroot "$f")
	[ -z "$staged" ] || return 0
	if [ -z "$rundir" ]; then
		mkdir -p "$CHROOT/tmp"
		rundir=$(mktemp -d "$CHROOT/tmp/ibtca-run.XXXXXX")
	fi
	dst=$rundir/$(basename "$f")
	[ ! -e "$dst" ] || dst=$rundir/$RANDOM-$(basename "$f")
	ln -f "$f" "$dst" 2>/dev/null || cp -f "$f" "$dst"
	staged=${dst#"$CHROOT"}
}
stage "$kernel"
kernel_in=$staged
stage "$initrd"
initrd_in=$staged

devargs=()
i=0
for s in "${sockets[@]}"; do
	in=$(to_chroot "$s")
	[ -n "$in" ] || die "socket $s is not inside the chroot $CHROOT"
	case "$in" in
	*'"'* | *'\'*) die "socket path $s contains a quote or backslash" ;;
	esac
	[ -S "$s" ] || log "warning: $s is not (yet) a socket"
	devargs+=(-device "{\"driver\":\"vfio-user-pci\",\"id\":\"tca$i\",\"socket\":{\"type\":\"unix\",\"path\":\"$in\"}}")
	i=$((i + 1))
done

case " $append " in
*" console="*) ;;
*) append="console=ttyS0 $append" ;;
esac
case " $append " in
*" panic="*) ;;
*) append="$append panic=-1" ;;
esac
case " $append " in
*" no_timer_check "*) ;;
*) append="$append no_timer_check" ;;
esac

kvm_ok() {
	[ -e /dev/kvm ] && [ -r /proc/modules ] &&
		grep -qE '^kvm_(intel|amd) ' /proc/modules
}
case "$accel" in
auto) if kvm_ok; then accel=kvm; else accel=tcg; fi ;;
kvm) kvm_ok || log "warning: KVM requested but kvm_intel/kvm_amd not loaded" ;;
tcg) ;;
*) die "bad --accel '$accel'" ;;
esac
if [ "$accel" = kvm ]; then
	cpuargs=(-accel kvm -cpu host)
else
	cpuargs=(-accel tcg -cpu max)
fi

[ -z "$serial_socket" ] || [ -n "$serial_log" ] || die "--serial-socket needs --serial-log"
if [ -n "$serial_log" ]; then
	slog_in=$(to_chroot "$serial_log")
	[ -n "$slog_in" ] || die "--serial-log must be inside the chroot $CHROOT"
	if [ -n "$serial_socket" ]; then
		case "$slog_in" in *,*) die "--serial-log path contains a comma" ;; esac
		ssock_in=$(to_chroot "$serial_socket")
		[ -n "$ssock_in" ] || die "--serial-socket must be inside the chroot $CHROOT"
		case "$ssock_in" in *,*) die "--serial-socket path contains a comma" ;; esac
		serialargs=(-chardev "socket,id=serial0,path=$ssock_in,server=on,wait=off,logfile=$slog_in"
			-serial chardev:serial0)
	else
		serialargs=(-serial "file:$slog_in")
	fi
elif [ -t 0 ]; then
	# Interactive: Ctrl-A X quits, Ctrl-A C reaches the QEMU monitor.
	serialargs=(-serial mon:stdio)
else
	serialargs=(-serial stdio)
fi

qemu=(
	qemu-system-x86_64
	-nodefaults -no-user-config -display none
	"${cpuargs[@]}"
	-smp "$smp"
	-m "$mem"
	-object "memory-backend-memfd,id=mem,size=$mem,share=on"
	-machine q35,memory-backend=mem
	-no-reboot
	"${serialargs[@]}"
	-kernel "$kernel_in"
	-initrd "$initrd_in"
	-append "$append"
	"${devargs[@]}"
	"${extra[@]}"
)

prefix=()
if [ -n "$affinity" ]; then
	command -v taskset >/dev/null || die "--cpu-affinity needs taskset"
	prefix=(taskset -c "$affinity")
fi
if [ -n "$niceness" ]; then
	prefix+=(nice -n "$niceness")
fi

ibtca_chroot_mount "$CHROOT"
log "accel=$accel mem=$mem smp=$smp devices=${#sockets[@]} timeout=${tmo}s${niceness:+ nice=$niceness}"
log "qemu ${qemu[*]:1}"

set +e
if [ -t 0 ]; then
	# Interactive: keep QEMU in the foreground so the console gets the tty.
	"${prefix[@]}" timeout --foreground -s "$tsig" -k 5 "$tmo" chroot "$CHROOT" "${qemu[@]}"
else
	"${prefix[@]}" timeout -s "$tsig" -k 5 "$tmo" chroot "$CHROOT" "${qemu[@]}" </dev/null
fi
rc=$?
set -e
[ "$rc" = 124 ] && log "timeout: QEMU killed after ${tmo}s"
exit "$rc"
