#!/usr/bin/env bash
# rdma_cm connection set-up traced stage by stage (docs/cm-setup.md): the
# two guests of scripts/ulp-bench.sh (OpenSM in n1, rxe0 and ibtca0 side by
# side), n1 serving `rping -s -P` on both addresses, n2 running RUNS
# `rping -c -V -C 1` on ibtca, RUNS on rxe, then both again, with ftrace
# in both guests (rdma_cma, ib_cma, ib_mad, ib_umad, ib_sa, process exec
# and exit, neighbour updates; kprobes on the ibtca driver's device
# commands and QUERY_PORT) and captures on both switch ports. Leaves in
# RUN_DIR: n1-trace.txt, n2-trace.txt (a trace_marker line "run T I"
# before and "end T I" after each rping), fabric/sw0-p1.pcap and
# sw0-p2.pcap; prints each transport's ms per run (marker to marker) and
# the median, and the ibtca runs' device commands per run.
#
#   scripts/cm-setup-trace.sh [--runs N] [--commands DIR] [RUN_DIR]
#                                # as root, after cargo build --release
#   scripts/cm-setup-trace.sh --summary N2_TRACE
#
# --runs N: rping runs per transport and round (two rounds; default 5).
# --commands DIR: write the guests' commands (DIR/n1.1, ..., n2.1, ...)
# and boot nothing.
# --summary N2_TRACE: print the summary of a run's n2-trace.txt.
# IBTCA_FABRIC and IBTCA_GUEST_DIR override the launcher and the guest
# image. Run it under `flock ~/.cache/ibtca/vm.lock timeout 900`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/ulp-guest.sh"
CACHE=${IBTCA_CACHE:-$HOME/.cache/ibtca}
GUEST=${IBTCA_GUEST_DIR:-$CACHE/guest}
FABRIC=${IBTCA_FABRIC:-${CARGO_TARGET_DIR:-$root/target}/release/ibtca-fabric}
runs=5 commands= summary=
while [ $# -gt 0 ]; do
	case "$1" in
	-h | --help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	--runs) runs=${2:?--runs needs a number}; shift 2 ;;
	--commands) commands=${2:?--commands needs a directory}; shift 2 ;;
	--summary) summary=${2:?--summary needs a trace}; shift 2 ;;
	-*) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
	*) break ;;
	esac
done
case $runs in
'' | *[!0-9]* | 0*) echo "--runs takes a whole number above 0, not '$runs'" >&2; exit 2 ;;
esac
[ $# -le 1 ] || { echo "one RUN_DIR at most (see --help)" >&2; exit 2; }

# summarize TRACE: ms per run from the markers, the median per transport,
# and the device commands (the ibtca/cmd kprobe) per ibtca run.
summarize() {
	awk '
	function ts(  i) { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9]+:$/) return substr($i, 1, length($i) - 1) + 0 }
	/tracing_mark_write: run / { t0 = ts(); tr = $(NF - 1); n = 0 }
	/ ibtca\/cmd: | cmd: \(ibtca_cmd_run/ { n++ }
	/tracing_mark_write: end / { ms[tr] = ms[tr] " " sprintf("%.1f", (ts() - t0) * 1000); c[tr] += n; k[tr]++ }
	END {
		for (t in ms) {
			m = split(substr(ms[t], 2), v, " ")
			for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (v[j] + 0 < v[i] + 0) { x = v[i]; v[i] = v[j]; v[j] = x }
			med = m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
			printf "CM-SETUP %s runs %d ms-per-run%s median %.1f device-commands-per-run %.1f\n", t, m, ms[t], med, c[t] / k[t]
		}
	}' "$1"
}
if [ -n "$summary" ]; then
	summarize "$summary"
	exit 0
fi

TR=/sys/kernel/tracing
trace_on() {
	cat <<EOF
[ -e $TR/trace ] || mount -t tracefs nodev $TR
echo 8192 > $TR/buffer_size_kb
for s in rdma_cma ib_cma ib_mad ib_umad ib_sa; do [ -e $TR/events/\$s/enable ] && echo 1 > $TR/events/\$s/enable; done
echo 1 > $TR/events/sched/sched_process_exec/enable
echo 1 > $TR/events/sched/sched_process_exit/enable
for e in neigh/neigh_update neigh/neigh_event_send_done neigh/neigh_create; do [ -e $TR/events/\$e/enable ] && echo 1 > $TR/events/\$e/enable; done
echo 'p:ibtca/cmd ibtca_cmd_run op=%si:u8' >> $TR/kprobe_events || echo CM-SETUP-NO-KPROBE cmd
echo 'r:ibtca/cmdret ibtca_cmd_run ret=\$retval:s32' >> $TR/kprobe_events || echo CM-SETUP-NO-KPROBE cmdret
echo 'p:ibtca/qport ibtca_ib_query_port' >> $TR/kprobe_events || echo CM-SETUP-NO-KPROBE qport
[ -e $TR/events/ibtca/enable ] && echo 1 > $TR/events/ibtca/enable
[ -e $TR/events/ibtca/qport/trigger ] && echo stacktrace > $TR/events/ibtca/qport/trigger
echo 1 > $TR/tracing_on
EOF
}

ulp_transport rxe
rxe_a=("${ULP_ADDR[@]}")
ulp_transport ibtca
ib_a=("${ULP_ADDR[@]}")
n1=("$(ulp_setup 1 rxe ibtca)")
n1+=("$(
	ulp_funcs
	trace_on
	for a in "${ib_a[0]}" "${rxe_a[0]}"; do
		echo "rping -s -P -V -S 64 -a $a >/dev/null 2>&1 &"
	done
	echo "wait_for 'listening ${ib_a[0]}:7174 && listening ${rxe_a[0]}:7174' 600 || exit 1"
	echo "touch /share/servers-up"
	echo "wait_for '[ -e /share/client-done ]' 12000"
	echo "echo 0 > $TR/tracing_on; cat $TR/trace > /share/n1-trace.txt"
)")
n2=("$(ulp_setup 2 rxe ibtca)")
n2+=("$(
	ulp_funcs
	echo "wait_for '[ -e /share/servers-up ]' 3000 || exit 1"
	trace_on
	echo "rc=0"
	for t in ibtca rxe ibtca rxe; do
		ulp_transport $t
		echo "for i in \$(seq $runs); do echo \"run $t \$i\" > $TR/trace_marker;" \
			"rping -c -a ${ULP_ADDR[0]} -I ${ULP_ADDR[1]} -V -S 64 -C 1 >/tmp/rping.out 2>&1 ||" \
			"{ echo CM-SETUP-FAILED $t; rc=1; }; echo \"end $t \$i\" > $TR/trace_marker; done"
	done
	echo "echo 0 > $TR/tracing_on; cat $TR/trace > /share/n2-trace.txt"
	echo "touch /share/client-done"
	echo "exit \$rc"
)")

if [ -n "$commands" ]; then
	mkdir -p "$commands"
	for i in "${!n1[@]}"; do printf '%s\n' "${n1[$i]}" >"$commands/n1.$((i + 1))"; done
	for i in "${!n2[@]}"; do printf '%s\n' "${n2[$i]}" >"$commands/n2.$((i + 1))"; done
	exit 0
fi

C=$(readlink -f "$CACHE/chroot")
RUN=${1:-$C/tmp/cm-setup-trace}
[ -x "$FABRIC" ] || { echo "no $FABRIC: cargo build --release (or set IBTCA_FABRIC)" >&2; exit 1; }
missing=$(ulp_missing "$GUEST")
[ -z "$missing" ] || { echo "cm-setup-trace: $missing" >&2; exit 1; }
"$FABRIC" down --run-dir "$RUN/fabric" >/dev/null 2>&1 || true
rm -rf -- "$RUN"
mkdir -p "$RUN"
share=$(mktemp -d "${TMPDIR:-/tmp}/ibtca-cm-setup-share.XXXXXX")
trap '"$FABRIC" down --run-dir "$RUN/fabric" >/dev/null 2>&1 || true; rm -rf -- "$share"' EXIT
trap 'exit 143' TERM INT
cat >"$RUN/topology.json" <<'EOF'
{
  "sm": "n1",
  "nodes": [ { "name": "n1", "lid": 1 }, { "name": "n2", "lid": 2 } ],
  "switches": [ { "name": "sw0", "ports": 2 } ],
  "links": [ { "a": "n1", "b": "sw0:1", "capture": "sw0-p1.pcap" }, { "a": "n2", "b": "sw0:2", "capture": "sw0-p2.pcap" } ],
  "guest": { "mem": "768M" }
}
EOF
args=()
for c in "${n1[@]}"; do args+=(--run "n1=$c"); done
for c in "${n2[@]}"; do args+=(--run "n2=$c"); done
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
start=$(date +%s)
status=0
"$FABRIC" up "$RUN/topology.json" --run-dir "$RUN/fabric" --guests --wait --guest-timeout 900 \
	--kernel "$GUEST/vmlinuz" --initrd "$GUEST/initramfs.cpio.gz" \
	--run-vm "$root/scripts/run-vm.sh" --share "$share" "${args[@]}" >"$RUN/up.log" 2>&1 || {
	status=1
	tail -n 20 "$RUN/up.log" >&2
	grep -ah 'CM-SETUP-\|ULP-MISSING\|WAIT-TIMEOUT' "$RUN"/fabric/n*.console >&2 || true
}
cp "$share"/n1-trace.txt "$share"/n2-trace.txt "$RUN"/ 2>/dev/null || status=1
echo "boot to power-off: $(($(date +%s) - start)) s; load average before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg)"
[ -e "$RUN/n2-trace.txt" ] && summarize "$RUN/n2-trace.txt"
exit $status
