#!/usr/bin/env bash
# OpenSM on the host, attached through Debian's libumad2sim, bringing up a
# fat tree (scripts/fat-tree-net.sh RADIX [PODS]: two levels, RADIX*RADIX/2
# CAs; three levels with PODS, PODS*(RADIX/2)^2 CAs) on ibtca
# (`ibtca-fabric up --net` with the net's first CA made a host port,
# docs/host-sm.md) and on ibsim with the same net file, both in each run:
# odd runs ibtca first, even runs ibsim first. For each it prints
#   sweep        seconds between OpenSM's "Entering DISCOVERING state" and
#                "SUBNET UP" in its log (`opensm -o`: one heavy sweep);
#   server       the simulator's CPU over the sweep (from just before
#                OpenSM starts to its exit; every thread of every process
#                of it, /proc/PID/task/*/schedstat): `cpu` seconds on a
#                CPU, of them `user` and `sys` seconds (utime and stime,
#                /proc/PID/stat), `rq-wait` seconds runnable but waiting
#                for one, `slices` times scheduled, `preempted`
#                involuntary context switches;
#   mads         answers the simulator sent OpenSM in the sweep: ibsim's
#                write(2) calls (/proc/PID/io syscw, one per answer); the
#                hive's `sent` from its "host port counters" log line
#                (with its batches per sendmmsg, timed-out, undeliverable
#                and lost answers); `?` when it logged none;
#   opensm       its CPU (user+system s, and each), waits (voluntary switches),
#                preempted (involuntary) and peak RSS (time(1));
#   discover     wall seconds of one `ibnetdiscover` afterwards, and the
#                switches, CAs and port lines (two per link) it listed;
#   hwm          the fabric's peak resident memory after the sweep and the
#                discovery (VmHWM: the hive's, or every process's summed
#                with --process-per-node; ibsim's);
#   up           (ibtca) wall seconds of `ibtca-fabric up --net`;
# (ibtca) a line `ibtca run N hive: host port counters ...`: the hive's last
# counters line after the sweep, with its MADs by kind (`kinds=`), kept
# before the run dir goes;
# then the run's ibtca/ibsim sweep ratio, and at the end the median of
# the ratios with their range, and the median server cpu and rq-wait of
# each simulator.
#
#   scripts/bench-host-sm.sh RADIX [RUNS] [PODS]   # after cargo build --release
#   PIN=1 scripts/bench-host-sm.sh 36 10 4         # everything on CPU 1
#   PPN=1 scripts/bench-host-sm.sh 36 1            # ibtca --process-per-node
#   OPENSM_LOGS=/tmp/sm scripts/bench-host-sm.sh 36 2  # keep OpenSM's logs
#
# PIN=CPU runs the fabric (`ibtca-fabric up` and what it starts), ibsim,
# OpenSM and ibnetdiscover on CPU CPU (taskset -c), as issue 35's ibsim
# figures were taken: the sweep's wall time is then about the sum of
# the CPU times. Needs opensm, infiniband-diags, libumad2sim0 and
# ibsim-utils (scripts/host-tools.sh). The release binaries are taken
# from $CARGO_TARGET_DIR (or target/), or IBTCA_FABRIC; UMAD2SIM names
# the library to preload (empty: none). ibsim attaches OpenSM to the
# net's first CA (SIM_HOST), ibtca makes that CA the host port.
# OPENSM_LOGS=DIR keeps each run's OpenSM log as
# DIR/opensm-ibtca-RUN.log and DIR/opensm-ibsim-RUN.log (DIR is made).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
}
bad() {
	echo "bench-host-sm.sh: error: $*" >&2
	echo "usage: scripts/bench-host-sm.sh RADIX [RUNS] [PODS] (--help)" >&2
	exit 2
}
case "${1:-}" in
-h | --help)
	usage
	exit 0
	;;
-*) bad "unknown option $1" ;;
"") bad "RADIX missing" ;;
esac
[ $# -le 3 ] || bad "too many arguments"
radix=$1
runs=${2:-1}
pods=${3:-}
[[ $radix =~ ^[0-9]+$ ]] && [ "$radix" -ge 2 ] && [ $((radix % 2)) = 0 ] || bad "RADIX $radix is not an even number >= 2"
[[ $runs =~ ^[0-9]+$ ]] && [ "$runs" -ge 1 ] || bad "RUNS $runs is not a number >= 1"
[ -z "$pods" ] || [[ $pods =~ ^[0-9]+$ ]] || bad "PODS $pods is not a number"
pin=()
if [ -n "${PIN:-}" ]; then
	[[ $PIN =~ ^[0-9]+$ ]] || bad "PIN=$PIN is not a CPU number"
	pin=(taskset -c "$PIN")
fi
ppn=()
[ "${PPN:-0}" = 0 ] || ppn=(--process-per-node)
keep_logs=${OPENSM_LOGS:-}
[ -z "$keep_logs" ] || mkdir -p "$keep_logs" || bad "cannot make OPENSM_LOGS=$keep_logs"
keep_logs=${keep_logs:+$(cd "$keep_logs" && pwd)}
fabric=${IBTCA_FABRIC:-${CARGO_TARGET_DIR:-target}/release/ibtca-fabric}
umad2sim=${UMAD2SIM-/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so}
[ -x "$fabric" ] || { echo "$fabric missing: cargo build --release" >&2; exit 1; }
for t in opensm ibnetdiscover ibsim ${pin:+taskset}; do
	command -v "$t" >/dev/null || { echo "$t missing: scripts/host-tools.sh" >&2; exit 1; }
done
[ -z "$umad2sim" ] || [ -e "$umad2sim" ] || { echo "$umad2sim missing: scripts/host-tools.sh" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "/usr/bin/time missing: apt-get install time" >&2; exit 1; }

work=$(mktemp -d /tmp/bench-host-sm.XXXXXX)
net=$work/fat-tree.net
bash scripts/fat-tree-net.sh "$radix" $pods >"$net"
cas=$(grep -c '^Ca' "$net")
switches=$(grep -c '^Switch' "$net")
first_ca=$(awk -F'"' '/^Ca/ { print $2; exit }' "$net")
# ibsim's tables are fixed at start (2,048 nodes, 256 switches, 13,312
# ports by default): size them to the net.
ibsim_size=(-N $((cas + switches + 16)) -S $((switches + 16)) -P $((switches * (radix + 1) + cas * 2 + 64)))
sock=bench-host-sm-$$
ibsim_pid=
hive_log=$work/run/hive.log

cleanup() {
	"$fabric" down --run-dir "$work/run" >/dev/null 2>&1 || true
	[ -z "$ibsim_pid" ] || kill "$ibsim_pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

# Seconds since midnight of an OpenSM log line ("Nov 25 22:21:42 373896 [...]").
log_time() {
	awk '{ split($3, t, ":"); printf "%.3f\n", t[1] * 3600 + t[2] * 60 + t[3] + $4 / 1e6; exit }'
}

# "CPU_NS WAIT_NS SLICES PREEMPTED UTIME STIME" summed over every thread
# of the processes $@ (a thread that ended in between is missed: the
# servers' threads live as long as they do); UTIME and STIME in clock
# ticks (/proc/PID/stat fields 14 and 15, the whole process).
sched() {
	local pid
	for pid in "$@"; do
		cat /proc/"$pid"/task/*/schedstat 2>/dev/null | sed 's/^/s /' || true
		cat /proc/"$pid"/task/*/status 2>/dev/null | sed -n 's/^nonvoluntary_ctxt_switches:[^0-9]*/p /p' || true
		# After "PID (COMM) " the fields count from 3 (the state).
		sed 's/^.*) /t /' /proc/"$pid"/stat 2>/dev/null || true
	done | awk '$1 == "s" { c += $2; w += $3; n += $4 } $1 == "p" { p += $2 } $1 == "t" { u += $13; k += $14 }
		END { printf "%.0f %.0f %.0f %.0f %.0f %.0f\n", c, w, n, p, u, k }'
}
clk_tck=$(getconf CLK_TCK)

# write(2) calls of process $1 so far (/proc/PID/io syscw).
syscw() {
	awk '/^syscw:/ { print $2 }' "/proc/$1/io" 2>/dev/null || echo 0
}

# The last "host port counters" line of the hive's log, its fields as
# KEY=VALUE words (none: no line yet).
hive_counters() {
	grep 'host port counters' "$hive_log" 2>/dev/null | tail -1 | grep -o '[a-z_]*=[^ ]*' || true
}

# How many "host port counters" lines the hive's log holds.
counter_lines() {
	local n
	n=$(grep -c 'host port counters' "$hive_log" 2>/dev/null || true)
	echo "${n:-0}"
}

# Field $1 of hive_counters output $2 (0 if absent).
field() {
	local v
	v=$(grep -m1 "^$1=" <<<"$2" | cut -d= -f2)
	echo "${v:-0}"
}

# One OpenSM sweep and one ibnetdiscover through the port named $1 (and
# SIM_HOST $2 for ibsim), the server being the processes $3 (its kind $4:
# ibtca or ibsim); prints its part of the run line and leaves
# "sweep S cpu C rqwait W" in $work/measured.
measure() {
	local log=$work/opensm.log kind=$4 s0 s1 w0 w1 c0 c1 lines0 mads
	local -a pids
	read -r -a pids <<<"$3"
	rm -f "$log"
	# libumad2sim makes its sysfs (sys-PID) in the working directory.
	cd "$work"
	s0=$(sched "${pids[@]}")
	[ "$kind" = ibsim ] && w0=$(syscw "${pids[0]}")
	[ "$kind" = ibtca ] && c0=$(hive_counters) && lines0=$(counter_lines)
	# A cache of its own each sweep (guid2lid, neighbors): an earlier
	# fabric's, with the same GUIDs in another shape, makes OpenSM doubt
	# its neighbors (ERR 7518).
	rm -rf "$work/osm-cache" && mkdir "$work/osm-cache"
	OSM_CACHE_DIR=$work/osm-cache IBSIM_SOCKNAME=$1 SIM_HOST=$2 LD_PRELOAD=$umad2sim /usr/bin/time -o "$work/opensm.time" -f '%M %U %S %w %c' \
		"${pin[@]}" timeout 900 opensm -o -f "$log" >/dev/null 2>&1 || { echo "opensm failed" >&2; tail -20 "$log" >&2; exit 1; }
	s1=$(sched "${pids[@]}")
	# $i: the run (the loop below).
	[ -z "$keep_logs" ] || cp "$log" "$keep_logs/opensm-$kind-$i.log"
	grep -q 'SUBNET UP' "$log" || { echo "no SUBNET UP" >&2; tail -20 "$log" >&2; exit 1; }
	if [ "$kind" = ibsim ]; then
		w1=$(syscw "${pids[0]}")
		mads=$((w1 - w0))
	else
		# OpenSM's DISCONNECT at exit makes the hive log its counters.
		for _ in $(seq 50); do
			[ "$(counter_lines)" -gt "$lines0" ] && break
			sleep 0.1
		done
		c1=$(hive_counters)
		grep 'host port counters' "$hive_log" 2>/dev/null | tail -1 | grep -o 'host port counters.*' >"$work/counters" || true
		if [ "$(counter_lines)" -gt "$lines0" ]; then
			mads=$(($(field sent "$c1") - $(field sent "$c0")))
			local k
			for k in requests timed_out undeliverable lost; do
				mads="$mads $k $(($(field "$k" "$c1") - $(field "$k" "$c0")))"
			done
			mads="$mads batches $(field batches "$c1")"
		else
			mads="?"
		fi
	fi
	local d0 d1 t0 t1 out
	d0=$(grep -m1 'Entering DISCOVERING state' "$log" | log_time)
	d1=$(grep -m1 'SUBNET UP' "$log" | log_time)
	grep ' ERR ' "$log" | sed 's/^/  opensm: /' | head -5 >&2 || true
	t0=$(date +%s.%N)
	out=$(IBSIM_SOCKNAME=$1 SIM_HOST=$2 LD_PRELOAD=$umad2sim "${pin[@]}" timeout 900 ibnetdiscover 2>/dev/null)
	t1=$(date +%s.%N)
	awk -v d0="$d0" -v d1="$d1" -v t0="$t0" -v t1="$t1" -v s0="$s0" -v s1="$s1" -v mads="$mads" -v tck="$clk_tck" \
		-v sw="$(grep -c '^Switch' <<<"$out")" -v ca="$(grep -c '^Ca' <<<"$out")" \
		-v ports="$(grep -c '^\[' <<<"$out")" -v sm="$(tail -1 "$work/opensm.time")" \
		'BEGIN {
			split(s0, a); split(s1, b); split(sm, o)
			cpu = (b[1] - a[1]) / 1e9; wait = (b[2] - a[2]) / 1e9
			printf "sweep %.2f s, server cpu %.2f s (user %.2f sys %.2f) rq-wait %.2f s slices %d preempted %d, mads %s, ", d1 - d0, cpu, (b[5] - a[5]) / tck, (b[6] - a[6]) / tck, wait, b[3] - a[3], b[4] - a[4], mads
			printf "opensm cpu %.2f s (user %.2f sys %.2f) waits %d preempted %d hwm %d MB, ", o[2] + o[3], o[2], o[3], o[4], o[5], o[1] / 1024
			printf "ibnetdiscover %.2f s (%d switches, %d CAs, %d port lines)", t1 - t0, sw, ca, ports
			printf "sweep %.3f cpu %.3f rqwait %.3f\n", d1 - d0, cpu, wait > "/dev/stderr"
		}' 2>"$work/measured"
}

# Sum of VmHWM (MB) of the processes $@.
hwm_mb() {
	local kb=0 pid v
	for pid in "$@"; do
		v=$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || echo 0)
		kb=$((kb + ${v:-0}))
	done
	echo $((kb / 1024))
}

# PIDs of the processes `up` started (its state file).
fabric_pids() {
	grep -o '"pid": *[0-9]*' "$work/run/fabric-state.json" | grep -o '[0-9]*$'
}

# Run $1 on ibtca: its line; its measures go to $work/ibtca.
run_ibtca() {
	local t0 t1 pids
	t0=$(date +%s.%N)
	"${pin[@]}" "$fabric" up --net "$net" --run-dir "$work/run" --timeout 600 \
		--sim-port "$first_ca=$sock" "${ppn[@]}" >"$work/up.log" 2>&1 || { cat "$work/up.log" >&2; exit 1; }
	t1=$(date +%s.%N)
	pids=$(fabric_pids | tr '\n' ' ')
	printf 'ibtca run %d: up %.1f s, %s' "$1" "$(echo "$t1 - $t0" | bc)" "$(measure "$sock" "" "$pids" ibtca)"
	cp "$work/measured" "$work/ibtca"
	# shellcheck disable=SC2086
	printf ', fabric hwm %d MB\n' "$(hwm_mb $pids)"
	[ ! -s "$work/counters" ] || printf 'ibtca run %d hive: %s\n' "$1" "$(cat "$work/counters")"
	"$fabric" down --run-dir "$work/run" >/dev/null
}

# Run $1 on ibsim: its line; its measures go to $work/ibsim.
run_ibsim() {
	IBSIM_SOCKNAME=$sock-ibsim "${pin[@]}" ibsim -s "${ibsim_size[@]}" -n "$net" >"$work/ibsim.log" 2>&1 &
	ibsim_pid=$!
	# ibsim binds its sockets, then reads the net: wait for its banner.
	until grep -qs 'Network simulator ready' "$work/ibsim.log"; do
		kill -0 "$ibsim_pid" 2>/dev/null || { cat "$work/ibsim.log" >&2; exit 1; }
		sleep 0.1
	done
	printf 'ibsim run %d: %s' "$1" "$(measure "$sock-ibsim" "$first_ca" "$ibsim_pid" ibsim)"
	cp "$work/measured" "$work/ibsim"
	printf ', ibsim hwm %d MB\n' "$(hwm_mb "$ibsim_pid")"
	kill "$ibsim_pid"
	wait "$ibsim_pid" 2>/dev/null || true
	ibsim_pid=
}

echo "fat tree radix $radix${pods:+, $pods pods}: $cas CAs, $switches switches${ppn[*]:+ (${ppn[*]})}${pin:+, pinned to CPU $PIN}; load $(cut -d' ' -f1-3 /proc/loadavg)"
: >"$work/runs"
for i in $(seq "$runs"); do
	if [ $((i % 2)) = 1 ]; then
		run_ibtca "$i"
		run_ibsim "$i"
	else
		run_ibsim "$i"
		run_ibtca "$i"
	fi
	# "ratio ibtca_cpu ibsim_cpu ibtca_rqwait ibsim_rqwait"
	paste -d' ' "$work/ibtca" "$work/ibsim" |
		awk '{ printf "%.4f %s %s %s %s\n", ($8 > 0 ? $2 / $8 : 0), $4, $10, $6, $12 }' >>"$work/runs"
	awk -v i="$i" 'END { printf "run %d: sweep ibtca/ibsim %.2f\n", i, $1 }' "$work/runs"
done

# The median of column $1 of the runs, and its min and max.
stats() {
	sort -g -k"$1,$1" "$work/runs" | awk -v c="$1" '{ v[NR] = $c }
		END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.2f (%.2f-%.2f)", m, v[1], v[NR] }'
}
printf 'median ibtca/ibsim %s over %d runs\n' "$(stats 1)" "$runs"
printf 'median server cpu s: ibtca %s, ibsim %s; rq-wait s: ibtca %s, ibsim %s\n' \
	"$(stats 2)" "$(stats 3)" "$(stats 4)" "$(stats 5)"
