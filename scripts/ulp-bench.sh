#!/usr/bin/env bash
# The upper-layer protocols measured, ibtca against its baselines in the
# same two guests in one boot (BENCHMARKS.md, "Upper-layer protocols
# between two guests (ibtca against soft-RoCE)"; docs/ulp-benchmarks.md).
# n1 runs OpenSM and serves (the nvmet-rdma target of
# scripts/ulp-guest.sh, iperf3, rping, ucmatose, ib_write_lat);
# n2 measures, one measurement at a time:
#   nvme     NVMe over Fabrics, fio on namespace 1 (null_blk, memory-backed,
#            filled first), SECONDS each, over ibtca (nvme-rdma on ibtca0,
#            addressed by IPoIB through rdma_cm), then over soft-RoCE (rxe0
#            on the management wire eth0): 4 KiB random reads at queue
#            depth 16 (IOPS) and 1 (mean latency), 128 KiB sequential
#            reads at queue depth 16 (MB/s), and the host guest's vCPU
#            busy share over each run; first, the host guest's own ceiling:
#            the 4 KiB random reads on its local null_blk (no fabric)
#   iperf3   n2 to n1, SECONDS each: over eth0 (the virtio management wire
#            soft-RoCE rides on), over ib0 in datagram mode, then in
#            connected mode (both guests; MTU 65520): the receiver's Mbit/s
#   rdma_cm  ten runs of `rping -c -V -C 1` (address and route resolution,
#            connection, one verified ping-pong, disconnect): ms per run;
#            ten runs of `ucmatose -c 10 -C 1` (ten connections at once,
#            each resolved, connected, one message each way, disconnected;
#            n1 starts a one-shot server per run): ms per connection, each
#            run timed alone; `ib_write_lat -R` (QPs connected by
#            rdma_cm), 64 B, 1000 iterations: the median (t_typical),
#            usec; on ibtca0 and rxe0
#   ucx      ucx_perftest (UCP tag matching over UCX's rc_verbs, ud_verbs
#            for wire-up only), on ibtca0 and rxe0: `-t tag_lat` 8 B, the
#            median one-way latency (usec), and `-t tag_bw` 1 MiB
#            (rendezvous), MB/s; each about SECONDS long (ucx_perftest has
#            no time limit: a short run first gives the iteration count)
# Prints one ULP-BENCH line per measurement (KEY VALUE UNIT), then a
# markdown table with ratios: ibtca / baseline for rates, baseline / ibtca
# for times, so above 1 is ibtca faster either way. Leaves the consoles in
# RUN_DIR (default $IBTCA_CACHE/chroot/tmp/ulp-bench). The guests boot
# the Debian root with ucx-utils and iputils-ping layered on
# (docs/guest-root.md).
#
#   scripts/ulp-bench.sh [--seconds N] [--rdma-cm] [--commands DIR] [RUN_DIR]
#                                # as root, after cargo build --release
#   scripts/ulp-bench.sh --table RESULTS
#
# --seconds N: each fio, iperf3 and ucx_perftest run's length (default 10).
# --rdma-cm: the rdma_cm rows alone (no NVMe-oF, iperf3 or UCX runs), in
# the same guests (docs/cm-setup.md).
# --commands DIR: write the guests' commands (DIR/n1.1, n1.2, ..., n2.1,
# ...; each one `ibtca-fabric up --run` command) and boot nothing.
# --table RESULTS: print the table of a run's ULP-BENCH lines (a run
# keeps them in RUN_DIR/results.txt) and boot nothing.
# IBTCA_FABRIC and IBTCA_GUEST_DIR override the launcher and the guest
# image. A failed measurement prints ULP-BENCH-FAILED and leaves its cells
# empty (a failed ucmatose run also prints its output, ULP-UCMATOSE-FAILED
# lines); the script then exits 1 after the table.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/ulp-guest.sh"
CACHE=${IBTCA_CACHE:-$HOME/.cache/ibtca}
GUEST=${IBTCA_GUEST_DIR:-$CACHE/guest}
FABRIC=${IBTCA_FABRIC:-${CARGO_TARGET_DIR:-$root/target}/release/ibtca-fabric}
seconds=10 commands= results= rdma_cm_only=
while [ $# -gt 0 ]; do
	case "$1" in
	-h | --help) sed -n '2,52p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	--seconds) seconds=${2:?--seconds needs a number}; shift 2 ;;
	--commands) commands=${2:?--commands needs a directory}; shift 2 ;;
	--table) results=${2:?--table needs a results file}; shift 2 ;;
	--rdma-cm) rdma_cm_only=1; shift ;;
	-*) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
	*) break ;;
	esac
done
case $seconds in
'' | *[!0-9]* | 0*) echo "--seconds takes a whole number above 0, not '$seconds'" >&2; exit 2 ;;
esac
[ $# -le 1 ] || { echo "one RUN_DIR at most (see --help)" >&2; exit 2; }

# table RESULTS: the markdown table of RESULTS' ULP-BENCH lines; a ratio
# needs both of its values.
table() {
	awk '
	$1 == "ULP-BENCH" { v[$2] = $3 }
	function cell(k) { return (k in v) ? v[k] : "" }
	function row(what, a, b, base, time, r) {
		r = ""
		if ((a in v) && (b in v) && v[a] + 0 > 0 && v[b] + 0 > 0)
			r = sprintf("%.2f", time ? v[b] / v[a] : v[a] / v[b])
		printf "| %s | %s | %s | %s | %s |\n", what, cell(a), cell(b), base, r
	}
	END {
		print "| Measurement | ibtca | Baseline | Baseline is | ibtca / baseline (×, above 1: ibtca faster) |"
		print "|---|---|---|---|---|"
		n = "nvme-randread-4k-qd16-iops/"
		row("NVMe-oF 4 KiB random read, QD 16 (IOPS)", n "ibtca", n "rxe", "soft-RoCE", 0)
		n = "nvme-seqread-128k-mbs/"
		row("NVMe-oF 128 KiB sequential read, QD 16 (MB/s)", n "ibtca", n "rxe", "soft-RoCE", 0)
		n = "nvme-randread-4k-qd1-usec/"
		row("NVMe-oF 4 KiB random read, QD 1, mean latency (usec; inverse ratio)", n "ibtca", n "rxe",
			"soft-RoCE", 1)
		n = "nvme-randread-4k-qd16-iops/"
		row("NVMe-oF 4 KiB random read, QD 16, against the host guest on its own null_blk (IOPS)", n "ibtca",
			n "local", "the same fio on /dev/nullb0 in the host guest, no fabric", 0)
		n = "nvme-randread-4k-qd16-busy/"
		row("Host guest vCPU busy during the QD 16 4 KiB reads (%)", n "ibtca", n "rxe", "soft-RoCE", 0)
		row("iperf3 over IPoIB, datagram mode (Mbit/s)", "iperf3-ib0-datagram", "iperf3-eth0",
			"iperf3 on the virtio management wire", 0)
		row("iperf3 over IPoIB, connected mode (Mbit/s)", "iperf3-ib0-connected", "iperf3-eth0",
			"iperf3 on the virtio management wire", 0)
		row("rping: resolve, connect, 1 verified ping-pong, disconnect (ms; inverse ratio)",
			"rping-connect/ibtca", "rping-connect/rxe", "soft-RoCE", 1)
		row("ucmatose, 10 connections at once: resolve, connect, 1 message each way, disconnect (ms per connection; inverse ratio)",
			"ucmatose-connect/ibtca", "ucmatose-connect/rxe", "soft-RoCE", 1)
		row("ib_write_lat -R, 64 B, median (usec; inverse ratio)", "write-lat-64/ibtca",
			"write-lat-64/rxe", "soft-RoCE", 1)
		row("ucx_perftest tag_lat over rc_verbs, 8 B, median (usec; inverse ratio)", "ucx-tag-lat-8/ibtca",
			"ucx-tag-lat-8/rxe", "soft-RoCE", 1)
		row("ucx_perftest tag_bw over rc_verbs, 1 MiB (MB/s)", "ucx-tag-bw-1m/ibtca", "ucx-tag-bw-1m/rxe",
			"soft-RoCE", 0)
	}' "$1"
}
if [ -n "$results" ]; then
	table "$results"
	exit 0
fi

# guarded NAME SCRIPT: n2's command running SCRIPT (a whole ulp-guest.sh
# command) so that its failure prints ULP-BENCH-FAILED NAME and lets the
# next measurement run; the last command reports it.
guarded() {
	printf 'cat >/tmp/bench-%s.sh <<'"'"'ULP_BENCH_EOF'"'"'\n%s\nULP_BENCH_EOF\n' "$1" "$2"
	echo "sh /tmp/bench-$1.sh || { echo 'ULP-BENCH-FAILED $1'; touch /tmp/bench-failed; }"
}

# fio_run NAME FIO_ARGS [DEV]: a time-based fio run on namespace 1 (or
# DEV) and its ULP-BENCH lines, from fio's terse line (field 7: read KiB/s,
# 8: IOPS, 40: mean read latency in usec), and the guest's vCPU busy share
# over the run from /proc/stat's cpu line (1 - idle and iowait over all).
fio_run() {
	echo "head -n 1 /proc/stat >/tmp/$1.stat0"
	echo "fio --name=$1 --filename=${3:-\$ns1} --ioengine=libaio --direct=1 --size=64M" \
		"--time_based --runtime=$seconds --output-format=terse $2 >/tmp/$1.terse 2>&1 || rc=1"
	echo "head -n 1 /proc/stat >/tmp/$1.stat1"
	echo "awk -F';' 'NF > 40 { printf \"ULP-BENCH nvme-$1-iops/$ULP_TRANSPORT %s IOPS\\n\", \$8;" \
		"printf \"ULP-BENCH nvme-$1-mbs/$ULP_TRANSPORT %.2f MB/s\\n\", \$7 * 1024 / 1e6;" \
		"printf \"ULP-BENCH nvme-$1-usec/$ULP_TRANSPORT %.0f usec\\n\", \$40 }' /tmp/$1.terse"
	echo "cat /tmp/$1.stat0 /tmp/$1.stat1 | awk '{ t = 0; for (i = 2; i <= NF; i++) t += \$i; i = \$5 + \$6 }" \
		"NR == 1 { t0 = t; i0 = i } NR == 2 && t > t0 { printf \"ULP-BENCH nvme-$1-busy/$ULP_TRANSPORT %.0f %%\\n\"," \
		"100 * (1 - (i - i0) / (t - t0)) }'"
}

# nvme_body [first]: ulp_host's BODY. The first transport's also fills
# namespace 1 and measures the host guest's own ceiling first: the same
# 4 KiB random reads on its local null_blk (/dev/nullb0, no fabric).
nvme_body() {
	if [ -n "${1:-}" ]; then
		echo "fio --name=fill --filename=\$ns1 --ioengine=libaio --direct=1 --rw=write --bs=1M --size=64M >/dev/null || rc=1"
		ULP_TRANSPORT=local fio_run randread-4k-qd16 "--rw=randread --bs=4k --iodepth=16" /dev/nullb0
	fi
	fio_run randread-4k-qd16 "--rw=randread --bs=4k --iodepth=16"
	fio_run randread-4k-qd1 "--rw=randread --bs=4k --iodepth=1"
	fio_run seqread-128k "--rw=read --bs=128k --iodepth=16"
}

# iperf_run KEY ADDR: iperf3 from n2 to n1's ADDR, the receiver's rate.
# Its summary line ends "N Mbits/sec ... receiver".
iperf_run() {
	echo "iperf3 -c $2 -t $seconds -f m >/tmp/iperf-$1.out 2>&1 || rc=1"
	echo "awk '/receiver\$/ { printf \"ULP-BENCH iperf3-$1 %s Mbit/s\\n\", \$(NF - 2) }' /tmp/iperf-$1.out"
}

# ucx_test TEST: ucx_perftest's KEY, options, the iterations of the short
# run that sizes the measured one and the warm-up; the column of that
# run's Final line that says how long one iteration takes (UCX_BY; $5:
# overall latency, usec, half a round trip; $7: overall bandwidth, MB/s of
# 2^20 bytes, one 1 MiB message per MB) and that time in seconds
# (UCX_ITER_S); the column the row reports ($3: median latency) and its
# unit.
UCX_TESTS=(lat bw)
ucx_test() {
	case $1 in
	lat) UCX_KEY=ucx-tag-lat-8 UCX_OPTS="-t tag_lat -s 8" UCX_PROBE=100 UCX_WARM=10
		UCX_BY=5 UCX_ITER_S='2 * $5 / 1e6' UCX_COL=3 UCX_UNIT=usec ;;
	bw) UCX_KEY=ucx-tag-bw-1m UCX_OPTS="-t tag_bw -s 1048576" UCX_PROBE=10 UCX_WARM=2
		UCX_BY=7 UCX_ITER_S='1 / $7' UCX_COL=7 UCX_UNIT=MB/s ;;
	esac
}
# ucx_env DEV: the data goes over rc_verbs on DEV. UCP's wire-up goes over
# ud_verbs on ibtca0; on rxe0 with ud_verbs every client aborts in UCX's
# IB transport before its first measurement, so there it goes over TCP on
# eth0 (docs/ulp-benchmarks.md).
ucx_env() {
	case $1 in
	ibtca0) echo "UCX_NET_DEVICES=ibtca0:1 UCX_TLS=rc_verbs,ud_verbs:aux" ;;
	rxe0) echo "UCX_NET_DEVICES=rxe0:1,eth0 UCX_TLS=rc_verbs,tcp:aux" ;;
	esac
}
# ucx_port DEV TEST PHASE: n1's one-shot server for that run (PHASE 0: the
# sizing run, 1: the measured one).
ucx_port() {
	local d=0 t=0
	[ "$1" = rxe0 ] && d=1
	[ "$2" = bw ] && t=1
	echo $((13500 + 4 * d + 2 * t + $3))
}

ulp_transport rxe
rxe_a=("${ULP_ADDR[@]}")
ulp_transport ibtca
ib_a=("${ULP_ADDR[@]}")
lat_port() { case $1 in ibtca0) echo 18515 ;; rxe0) echo 18516 ;; esac; }
# ucmatose has no persistent server: one serves UCM_CONNS connections and
# exits. n1 starts one per run on each address (port 7471, ucmatose's
# default) and, once it listens, says so in the share (ucmatose-T-RUN); n2
# waits for that outside the timed window, then times the run alone.
UCM_RUNS=10 UCM_CONNS=10
UCM_OPTS="-c $UCM_CONNS -C 1"
ucm_runs=$(seq -s ' ' $UCM_RUNS)

n1=("$(ulp_setup 1 rxe ibtca)")
# The rdma_cm servers, up before the target: rping (-P: one connection
# after another) on each address, one ib_write_lat -R per device.
n1+=("$(
	ulp_funcs
	echo "iperf3 -s -D || exit 1"
	for a in "${ib_a[0]}" "${rxe_a[0]}"; do
		echo "rping -s -P -V -S 64 -a $a >/dev/null 2>&1 &"
	done
	for t in ibtca rxe; do
		ulp_transport $t
		a=${ULP_ADDR[0]}
		cat <<EOF
for i in $ucm_runs; do
	ucmatose -b $a $UCM_OPTS &
	p=\$!
	wait_for 'listening $a:7471' 600 && touch /share/ucmatose-$t-\$i || break
	wait \$p
done >/tmp/ucmatose-srv-$t.log 2>&1 &
EOF
	done
	for d in ibtca0 rxe0; do
		echo "ib_write_lat -R -d $d -s 64 -n 1000 -p $(lat_port $d) >/tmp/lat-$d.log 2>&1 &"
	done
	# ucx_perftest serves one run and exits: one server per run, each
	# up (listening on its TCP port) before n2 can get that far.
	for d in ibtca0 rxe0; do
		for t in "${UCX_TESTS[@]}"; do
			for ph in 0 1; do
				p=$(ucx_port $d $t $ph)
				echo "$(ucx_env $d) ucx_perftest -P 0 -p $p >/tmp/ucx-srv-$p.log 2>&1 &"
				printf "wait_for \"cat /proc/net/tcp /proc/net/tcp6 | grep -Eq ':%04X 0+:0000 0A'\" 600 || exit 1\n" "$p"
			done
		done
	done
	echo "wait_for 'listening ${ib_a[0]}:7174 && listening ${rxe_a[0]}:7174' 600 || exit 1"
)")
n1+=("$(ulp_target rxe ibtca)")
# Connected mode once n2's datagram iperf3 is done; up until n2 is done.
n1+=("$(
	ulp_funcs
	echo "wait_for '[ -e /share/iperf-datagram-done ]' 12000 || exit 1"
	echo "echo connected >/sys/class/net/ib0/mode || exit 1"
	echo "echo \"ULP-IB0 n1 \$(cat /sys/class/net/ib0/mode) mtu \$(cat /sys/class/net/ib0/mtu)\""
	echo "touch /share/connected-n1"
	echo "wait_for '[ -e /share/bench-done ]' 12000"
)")

n2=("$(ulp_setup 2 rxe ibtca)")
ulp_transport ibtca
n2+=("$(guarded nvme-ibtca "$(ulp_host "$(nvme_body fill)")")")
ulp_transport rxe
n2+=("$(guarded nvme-rxe "$(ulp_host "$(nvme_body)")")")
n2+=("$(guarded iperf3 "$(
	ulp_funcs
	echo "trap 'touch /share/iperf-datagram-done' EXIT"
	echo "rc=0"
	iperf_run eth0 "${rxe_a[0]}"
	iperf_run ib0-datagram "${ib_a[0]}"
	echo "touch /share/iperf-datagram-done"
	echo "echo connected >/sys/class/net/ib0/mode || exit 1"
	echo "echo \"ULP-IB0 n2 \$(cat /sys/class/net/ib0/mode) mtu \$(cat /sys/class/net/ib0/mtu)\""
	echo "wait_for '[ -e /share/connected-n1 ]' 3000 || exit 1"
	echo "wait_for 'ping -c1 -W1 ${ib_a[0]} >/dev/null' 300 || exit 1"
	iperf_run ib0-connected "${ib_a[0]}"
	echo "exit \$rc"
)")")
rdma_cm=$(guarded rdma_cm "$(
	ulp_funcs
	echo "rc=0"
	for t in ibtca rxe; do
		ulp_transport $t
		a=${ULP_ADDR[0]} b=${ULP_ADDR[1]} d=$ULP_DEV
		# /proc/uptime counts hundredths: ten runs give ms per run.
		cat <<EOF
t0=\$(cut -d' ' -f1 /proc/uptime)
for i in 1 2 3 4 5 6 7 8 9 10; do rping -c -a $a -I $b -V -S 64 -C 1 >/tmp/rping-$t.out 2>&1 || rc=1; done
t1=\$(cut -d' ' -f1 /proc/uptime)
awk -v t0=\$t0 -v t1=\$t1 'BEGIN { printf "ULP-BENCH rping-connect/$t %.1f ms\\n", (t1 - t0) * 100 }'
ns=0
for i in $ucm_runs; do
	wait_for '[ -e /share/ucmatose-$t-\$i ]' 600 || { ns=; break; }
	s=\$(date +%s%N)
	ucmatose -s $a -b $b $UCM_OPTS >/tmp/ucmatose-$t.out 2>&1 || { ns=; break; }
	e=\$(date +%s%N)
	ns=\$((ns + e - s))
done
if [ -n "\$ns" ]; then
	awk -v ns=\$ns 'BEGIN { printf "ULP-BENCH ucmatose-connect/$t %.2f ms\\n", ns / 1e6 / $((UCM_RUNS * UCM_CONNS)) }'
else
	rc=1
	tail -n 20 /tmp/ucmatose-$t.out 2>&1 | sed 's/^/ULP-UCMATOSE-FAILED $t: /'
fi
timeout 300 ib_write_lat -R -d $d -s 64 -n 1000 -p $(lat_port "$d") $a >/tmp/lat-$t.out 2>&1 || rc=1
grep -A1 '#bytes' /tmp/lat-$t.out | tail -n 1 | awk 'NF >= 5 { printf "ULP-BENCH write-lat-64/$t %s usec\\n", \$5 }'
EOF
	done
	echo "exit \$rc"
)")
n2+=("$rdma_cm")
n2+=("$(guarded ucx "$(
	ulp_funcs
	echo "rc=0"
	for t in ibtca rxe; do
		ulp_transport $t
		for u in "${UCX_TESTS[@]}"; do
			ucx_test "$u"
			run="$(ucx_env "$ULP_DEV") timeout $((3 * seconds + 120)) ucx_perftest -P 0 ${rxe_a[0]} $UCX_OPTS -w $UCX_WARM"
			o=/tmp/$UCX_KEY-$t
			cat <<EOF
$run -p $(ucx_port "$ULP_DEV" "$u" 0) -n $UCX_PROBE >$o.size 2>&1 || rc=1
n=\$(awk '\$1 == "Final:" && \$$UCX_BY > 0 { n = int($seconds / ($UCX_ITER_S)); print (n > 0 ? n : 1) }' $o.size)
[ -n "\$n" ] && $run -p $(ucx_port "$ULP_DEV" "$u" 1) -n \$n >$o.out 2>&1 || rc=1
awk '\$1 == "Final:" { printf "ULP-BENCH $UCX_KEY/$t %s $UCX_UNIT (%s iterations)\\n", \$$UCX_COL, \$2; f = 1 }
	END { exit !f }' $o.out 2>/dev/null || { grep -hv '^\\[.*\\] \\[ *[0-9]*\\]' $o.size $o.out | tail -n 20; $(ucx_env "$ULP_DEV") ucx_info -d | grep -E '(Transport|Device):'; } 2>&1 |
	sed 's/^/ULP-UCX-FAILED $UCX_KEY\/$t: /'
EOF
		done
	done
	echo "exit \$rc"
)")")
n2+=("touch /share/bench-done; [ ! -e /tmp/bench-failed ]")
# --rdma-cm: n1's set-up and servers, which it announces, then up until
# n2 is done; n2's set-up, the wait for n1's servers, the rdma_cm
# measurement and the last command.
if [ -n "$rdma_cm_only" ]; then
	n1=("${n1[0]}" "${n1[1]}" "$(
		ulp_funcs
		echo "touch /share/rdma-cm-servers-up"
		echo "wait_for '[ -e /share/bench-done ]' 12000"
	)")
	n2=("${n2[0]}" "$(ulp_funcs; echo "wait_for '[ -e /share/rdma-cm-servers-up ]' 12000")" "$rdma_cm" "${n2[-1]}")
fi

if [ -n "$commands" ]; then
	ulp_write_commands "$commands"
	exit 0
fi

export ULP_GUEST_PACKAGES=ucx-utils,iputils-ping
C=$(readlink -f "$CACHE/chroot")
RUN=${1:-$C/tmp/ulp-bench}
[ -x "$FABRIC" ] || { echo "no $FABRIC: cargo build --release (or set IBTCA_FABRIC)" >&2; exit 1; }
ulp_transport ibtca
missing=$(ulp_missing "$GUEST")
[ -z "$missing" ] || { echo "ulp-bench: $missing" >&2; exit 1; }

"$FABRIC" down --run-dir "$RUN/fabric" >/dev/null 2>&1 || true
rm -rf -- "$RUN"
mkdir -p "$RUN"
share=$(mktemp -d "${TMPDIR:-/tmp}/ibtca-ulp-bench-share.XXXXXX")
trap '"$FABRIC" down --run-dir "$RUN/fabric" >/dev/null 2>&1 || true; rm -rf -- "$share"' EXIT
trap 'exit 143' TERM INT
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
start=$(date +%s)
status=0
ulp_up "$FABRIC" "$RUN/fabric" "$GUEST" "$share" "${n1[@]}" -- "${n2[@]}" >"$RUN/up.log" 2>&1 || {
	status=1
	tail -n 20 "$RUN/up.log" >&2
	grep -ah 'ULP-MISSING\|WAIT-TIMEOUT\|ULP-BENCH-FAILED' "$RUN"/fabric/n*.console >&2 || true
}
grep -a '^ULP-BENCH' "$RUN/fabric/n2.console" | tr -d '\r' | tee "$RUN/results.txt"
echo "boot to power-off: $(($(date +%s) - start)) s; load average before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
table "$RUN/results.txt"
exit $status
