#!/usr/bin/env bash
# Runs the command beside every table of BENCHMARKS.md, one after the
# other, so that the whole file can be measured again on one machine with
# one build in one sitting. Each entry is the command the file shows (an
# `ibtca-bench` subcommand, `ibtca-gateway-bench`, a scripts/*bench*.sh
# script, ...): this script measures nothing itself.
#
#   scripts/bench-all.sh --list             # entries, tables, needs, minutes
#   scripts/bench-all.sh --dry-run          # the commands, nothing run
#   scripts/bench-all.sh                    # as root, after the builds below
#   scripts/bench-all.sh --only verbs,crc --out /tmp/b
#
# Build first: `cargo build --release --workspace` (the binaries are taken
# from $CARGO_TARGET_DIR/release, or target/release) and, for the entries
# that boot guests, `bash scripts/build-guest.sh` (as root; the VM stack
# from scripts/setup-vm-stack.sh; ulp also wants the Debian root with
# ucx-utils, docs/guest-root.md); host-sm and fat-tree-edges want
# scripts/host-tools.sh (opensm, infiniband-diags, ibsim, libumad2sim).
#
# Each entry's output (stdout and stderr) goes to OUT/NAME.log; OUT also
# gets machine.txt (CPU, commit, load), commands.sh (what --dry-run
# prints) and summary.md (one row per entry). An entry that boots guests
# through a script holds the VM lock ($IBTCA_VM_LOCK, or vm.lock in
# $IBTCA_CACHE, default ~/.cache/ibtca: the lock the VM tests take) while
# it runs; the entries that boot guests through the test harness
# (ibtca-bench guest-*, mmio, cargo test) take that lock themselves. A
# failed or timed-out entry (3 times its estimate, 10 minutes at the
# least) does not stop the run. Exit status: 0 when every entry passed, 1
# when one failed, 2 for a usage error, 130 when interrupted.
# The entries' commands are single-quoted on purpose: they expand when run.
# shellcheck disable=SC2016
set -euo pipefail
cd "$(dirname "$0")/.."
me=bench-all.sh

usage() {
	cat <<EOF
usage: scripts/$me [--only NAME[,NAME...]] [--out DIR] [--list | --dry-run]

Runs the command of every BENCHMARKS.md table in turn and keeps each
one's raw output in DIR/NAME.log.

  --only NAMES  only these entries (comma-separated; see --list), in
                this script's order
  --out DIR     where the outputs go (default target/bench-all/DATE)
  --list        the entries: name, estimated minutes, what each needs,
                the BENCHMARKS.md section it measures; runs nothing
  --dry-run     the commands, as they would run; runs nothing
  -h, --help    this text

Needs: vm = the VM stack and guest image; root; lock = holds the VM lock
(self-lock: the command takes it); soft-roce = rxe in the guests;
host-tools = scripts/host-tools.sh (opensm, ibsim, libumad2sim); ucx =
the guests' Debian root with ucx-utils; cargo = builds the test first.
EOF
}

die_usage() {
	echo "$me: error: $*" >&2
	echo "try '$me --help'" >&2
	exit 2
}

# The entries, in the order they run: BENCHMARKS.md's order, the largest
# host SM fabric at the end of its group. entry NAME MINUTES NEEDS LOCK
# SECTION COMMAND: LOCK is "lock" (this script holds the VM lock), "self"
# (the command takes it) or "-"; SECTION is the BENCHMARKS.md heading of
# the table ("; " between two); COMMAND runs under bash from the checkout with $BIN (the
# release binaries) and $OUT set.
names=() minutes=() needs=() locks=() sections=() commands=()
entry() {
	names+=("$1") minutes+=("$2") needs+=("$3") locks+=("$4") sections+=("$5") commands+=("$6")
}
entry verbs 1 - - 'Verbs (no VM)' \
	'"$BIN/ibtca-bench" verbs --seconds 2'
entry verbs-pairs 2 - - 'Verbs (no VM)' \
	'"$BIN/ibtca-bench" verbs --seconds 3 --only write-1m --pairs 10'
entry verbs-pairs-batch 1 - - 'Verbs (no VM)' \
	'"$BIN/ibtca-bench" verbs --seconds 3 --only write-1m --pairs 4 --sched-batch'
entry guest-verbs 2 vm,root self 'Verbs between two guests' \
	'"$BIN/ibtca-bench" guest-verbs --placement all'
entry perftest 2 vm,root,soft-roce lock 'perftest between two guests (ibtca against soft-RoCE); Latency: the distribution' \
	'bash scripts/perftest-table.sh'
entry ulp 6 vm,root,soft-roce,ucx lock 'Upper-layer protocols between two guests (ibtca against soft-RoCE)' \
	'bash scripts/ulp-bench.sh'
entry guest-boot 1 vm,root,cargo self 'Guest boot' \
	'cargo test -p ibtca-tests --test vm_ibdev -- --include-ignored --nocapture'
entry gateway 1 - - 'ATM gateway (no VM)' \
	'"$BIN/ibtca-gateway-bench"'
entry sma 1 - - 'Subnet management (no VM)' \
	'"$BIN/ibtca-bench" sma --smps 20000'
entry subnet-up-4 1 vm,root lock 'Subnet management with OpenSM' \
	'bash scripts/bench-subnet-up.sh qemu-configs/sm-four-nodes-two-switches.json 3'
entry subnet-up-8 1 vm,root lock 'Subnet management with OpenSM' \
	'bash scripts/bench-subnet-up.sh qemu-configs/sm-eight-nodes-two-switches.json 3'
entry fabric-hive 1 - - 'Guestless nodes in one process' \
	'bash scripts/bench-fabric-up.sh 36'
entry fabric-process-per-node 1 - - 'Guestless nodes in one process' \
	'bash scripts/bench-fabric-up.sh --process-per-node 36'
entry hive-152 2 - - 'Guestless nodes in one process' \
	'bash scripts/bench-fabric-up.sh --hive 152 && bash scripts/bench-fabric-up.sh --hive --routes 152'
entry host-sm-64 1 host-tools - 'OpenSM on the host, against ibtca and ibsim' \
	'bash scripts/bench-host-sm.sh 8 10 4'
entry host-sm-324 1 host-tools - 'OpenSM on the host, against ibtca and ibsim' \
	'bash scripts/bench-host-sm.sh 36 10 1'
entry host-sm-648 1 host-tools - 'OpenSM on the host, against ibtca and ibsim' \
	'bash scripts/bench-host-sm.sh 36 10'
entry host-sm-1296 2 host-tools - 'OpenSM on the host, against ibtca and ibsim' \
	'bash scripts/bench-host-sm.sh 36 10 4'
entry host-sm-648-pinned 1 host-tools - 'OpenSM on the host, against ibtca and ibsim' \
	'PIN=1 bash scripts/bench-host-sm.sh 36 10'
entry host-sm-1296-pinned 2 host-tools - 'OpenSM on the host, against ibtca and ibsim' \
	'PIN=1 bash scripts/bench-host-sm.sh 36 10 4'
entry host-sm-2592 1 host-tools - 'OpenSM on the host, against ibtca and ibsim' \
	'bash scripts/bench-host-sm.sh 36 1 8'
entry host-sm-5184 1 host-tools - 'OpenSM on the host, against ibtca and ibsim' \
	'bash scripts/bench-host-sm.sh 36 1 16'
entry host-sm-11664 6 host-tools - 'OpenSM on the host, against ibtca and ibsim' \
	'bash scripts/bench-host-sm.sh 36 1 36'
entry fat-tree-edges 2 vm,root,host-tools lock 'Guests at the edges of a 1,296-CA tree' \
	'bash scripts/fat-tree-edges.sh'
entry cross-host 1 root - 'A link between hosts' \
	'"$BIN/ibtca-bench" cross-host --seconds 2'
entry drdma 2 - - 'DRDMA (no VM); DRDMA against an ordinary WQE' \
	'"$BIN/ibtca-bench" drdma --seconds 2'
entry drdma-verbs 2 vm,root lock 'DRDMA from libibverbs between two guests' \
	'bash scripts/drdma-verbs-bench.sh'
entry crc 1 - - 'CRC' \
	'"$BIN/ibtca-bench" crc'
entry switch 1 - - 'Switches (no VM)' \
	'"$BIN/ibtca-bench" switch --seconds 2'
entry guest-drdma 1 vm,root self 'DRDMA between two guests, window trapped and mapped' \
	'"$BIN/ibtca-bench" guest-drdma'
entry mmio 1 vm,root self 'Trapped MMIO' \
	'"$BIN/ibtca-bench" mmio'

only='' out='' mode=run
while [ $# -gt 0 ]; do
	case $1 in
	--only)
		if [ $# -lt 2 ] || [ -z "$2" ]; then die_usage "--only needs entry names"; fi
		only=$2
		shift 2
		;;
	--out)
		if [ $# -lt 2 ] || [ -z "$2" ]; then die_usage "--out needs a directory"; fi
		out=$2
		shift 2
		;;
	--list) mode=list; shift ;;
	--dry-run) mode=dry-run; shift ;;
	-h | --help)
		usage
		exit 0
		;;
	*) die_usage "unknown argument '$1'" ;;
	esac
done

# The selected entries' indices.
selected=()
if [ -z "$only" ]; then
	selected=("${!names[@]}")
else
	IFS=, read -r -a wanted <<<"$only"
	[ ${#wanted[@]} -gt 0 ] || die_usage "--only needs entry names"
	for w in "${wanted[@]}"; do
		found=
		for i in "${!names[@]}"; do
			[ "${names[$i]}" = "$w" ] && found=1
		done
		[ -n "$found" ] || die_usage "no entry '$w' (see --list)"
	done
	for i in "${!names[@]}"; do
		for w in "${wanted[@]}"; do
			if [ "${names[$i]}" = "$w" ]; then
				selected+=("$i")
				break
			fi
		done
	done
fi

needs_of() {
	local i=$1 n=${needs[$1]}
	case ${locks[$i]} in
	lock) n="$n,lock" ;;
	self) n="$n,self-lock" ;;
	esac
	echo "${n#-,}"
}

if [ "$mode" = list ]; then
	total=0
	printf '%-24s %4s  %-30s %s\n' NAME MIN NEEDS SECTION
	for i in "${selected[@]}"; do
		printf '%-24s %4s  %-30s %s\n' "${names[$i]}" "${minutes[$i]}" "$(needs_of "$i")" "${sections[$i]}"
		total=$((total + minutes[i]))
	done
	printf '%-24s %4s\n' total "$total"
	exit 0
fi

[ -n "$out" ] || out=target/bench-all/$(date -u +%Y-%m-%dT%H%MZ)
BIN=$(readlink -m "${CARGO_TARGET_DIR:-target}/release")
cache=${IBTCA_CACHE:-$HOME/.cache/ibtca}
lock=${IBTCA_VM_LOCK:-$cache/vm.lock}

# The commands as a script one could run by hand, without the VM lock.
dry_run() {
	echo "# scripts/$me: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
	echo "export BIN=$(printf %q "$BIN") OUT=$(printf %q "$(readlink -m "$out")")"
	for i in "${selected[@]}"; do
		echo
		echo "# ${names[$i]}: ${sections[$i]} (~${minutes[$i]} min; needs $(needs_of "$i"))"
		echo "${commands[$i]}"
	done
}
if [ "$mode" = dry-run ]; then
	dry_run
	exit 0
fi

mkdir -p -- "$out"
OUT=$(readlink -f "$out")
export BIN OUT
dry_run >"$OUT/commands.sh"
{
	echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with changes)')"
	echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | sort | uniq -c | sed 's/^ *//')"
	echo "cpus: $(nproc)"
	# As scripts/run-vm.sh chooses (--accel auto).
	if [ -e /dev/kvm ] && grep -qE '^kvm_(intel|amd) ' /proc/modules 2>/dev/null; then
		echo "guests: KVM"
	else
		echo "guests: TCG (no KVM)"
	fi
	echo "kernel: $(uname -r)"
	echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/machine.txt"

# Say what will not work, and run anyway: each command says why it failed.
for b in ibtca-bench ibtca-device ibtca-fabric ibtca-gateway-bench; do
	[ -x "$BIN/$b" ] || echo "$me: warning: no $BIN/$b: cargo build --release --workspace" >&2
done
vm=
for i in "${selected[@]}"; do
	case ,${needs[$i]}, in
	*,root,*) [ "$(id -u)" = 0 ] || echo "$me: warning: ${names[$i]} needs root" >&2 ;;
	esac
	case ,${needs[$i]}, in *,vm,*) vm=1 ;; esac
done

# Guests leave the VM stack's chroot mounted (scripts/run-vm.sh); the last
# user out unmounts, as scripts/test.sh does.
release_chroot() {
	if [ -n "$vm" ] && [ -r "$cache/stack.env" ]; then
		# shellcheck source=scripts/chroot-mounts.sh
		. scripts/chroot-mounts.sh
		local chroot
		chroot=$(sed -n 's/^IBTCA_CHROOT=//p' "$cache/stack.env")
		[ -z "$chroot" ] || ibtca_chroot_release "$chroot"
	fi
}
child=
on_signal() {
	if [ -n "$child" ]; then
		# timeout passes the signal on to the entry's processes.
		kill -TERM "$child" 2>/dev/null || true
		wait "$child" 2>/dev/null || true
	fi
	exit 130
}
trap release_chroot EXIT
trap on_signal INT TERM

# IBTCA_BENCH_ALL_RUNNER replaces `bash -c` (the script's own test runs a
# stand-in there, called with the entry's command and name).
runner=(bash -c)
if [ -n "${IBTCA_BENCH_ALL_RUNNER:-}" ]; then
	read -r -a runner <<<"$IBTCA_BENCH_ALL_RUNNER"
fi

fmt_time() {
	printf '%dm%02ds' $(($1 / 60)) $(($1 % 60))
}

echo "$me: ${#selected[@]} entries, outputs in $OUT" >&2
t_start=$SECONDS
failed=()
rows=()
n=0
for i in "${selected[@]}"; do
	n=$((n + 1))
	name=${names[$i]}
	log=$OUT/$name.log
	echo "$me: [$n/${#selected[@]}] $name: ${sections[$i]} (~${minutes[$i]} min), started $(date -u +%H:%M:%S) UTC, $(fmt_time $((SECONDS - t_start))) into the run" >&2
	if [ "${locks[$i]}" = lock ]; then
		if ! exec 9>>"$lock"; then
			failed+=("$name")
			rows+=("| $name | ${sections[$i]} | FAILED (cannot open the VM lock $lock) | - | - |")
			continue
		fi
		if ! flock -n 9; then
			echo "$me: $name: waiting for the VM lock $lock" >&2
			flock 9
		fi
	fi
	limit=$((3 * minutes[i]))
	[ "$limit" -ge 10 ] || limit=10
	t0=$SECONDS
	rc=0
	# fd 9 closed: processes the entry leaves behind do not keep the lock.
	# The name is the command's $0 (bash prefixes its errors with it).
	timeout -k 30 "${limit}m" "${runner[@]}" "${commands[$i]}" "$name" >"$log" 2>&1 9>&- &
	child=$!
	wait "$child" || rc=$?
	child=
	[ "${locks[$i]}" != lock ] || exec 9>&-
	took=$((SECONDS - t0))
	load=$(cut -d' ' -f1-3 /proc/loadavg)
	case $rc in
	0) result=passed ;;
	124) result="FAILED (timed out after $limit min)" ;;
	*) result="FAILED (exit $rc)" ;;
	esac
	[ "$rc" = 0 ] || failed+=("$name")
	rows+=("| $name | ${sections[$i]} | $result | $(fmt_time "$took") | $load |")
	echo "$me: [$n/${#selected[@]}] $name: $result in $(fmt_time "$took") (log $log)" >&2
done

{
	echo "Commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(nproc) CPUs, $(fmt_time $((SECONDS - t_start))) in all; outputs in $OUT."
	echo
	echo "| entry | BENCHMARKS.md section | result | duration | load average (1/5/15 min) at the end |"
	echo "|---|---|---|---|---|"
	printf '%s\n' "${rows[@]}"
	echo
	if [ ${#failed[@]} = 0 ]; then
		echo "All ${#selected[@]} entries passed."
	else
		echo "${#failed[@]} of ${#selected[@]} entries failed: $(printf '%s\n' "${failed[@]}" | paste -sd, - | sed 's/,/, /g')"
	fi
} | tee "$OUT/summary.md"
[ ${#failed[@]} = 0 ]
