#!/usr/bin/env bash
# DRDMA through the ibtca direct verbs against ordinary RDMA WRITE and READ
# from libibverbs, in two guests, one boot (docs/drdma-verbs.md, "From
# libibverbs"): `ibtcadv-bench` (guest-driver/tests/provider/ibtcadv_bench/)
# over one RC QP pair, 64 B to 64 KiB, QD 1 latency (median, p99) and the
# rate with several transfers in flight, every transfer's bytes checked.
# n2's device has the mapped window, n1's the trapped one (the vm_uverbs
# topology): the client on n2 (server n1) measures the mapped window, then
# the client on n1 (server n2) the trapped one. The ordinary rows of each
# run come from the same client's device, so the mapped run's ordinary
# doorbells are non-posted BAR writes too (QEMU posts no BAR write to a
# device with an mmappable window).
#
#   scripts/drdma-verbs-bench.sh [--iters N] [--seconds S] [RUN_DIR]
#                                # as root, after cargo build --release
#   scripts/drdma-verbs-bench.sh --table RESULTS
#
# --iters N: transfers (QD 1) or rounds (in flight) per cell at most
# (default 200); --seconds S: a cell stops after S seconds (default 1),
# at 3 at the least.
# --table RESULTS: the table of a run's DVBENCH lines (a run keeps them in
# RUN_DIR/results.txt) and boot nothing.
# Prints the DVBENCH lines, then a markdown table with DRDMA / RDMA for
# each: above 1 in msg/s favours DRDMA, below 1 in µs does. Exits 1 when a
# client failed (a DVBENCH-FAIL line, or no verified line). RUN_DIR
# (default $IBTCA_CACHE/chroot/tmp/drdma-verbs-bench) keeps the consoles.
# IBTCA_FABRIC and IBTCA_GUEST_DIR override the launcher and the image.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${IBTCA_CACHE:-$HOME/.cache/ibtca}
GUEST=${IBTCA_GUEST_DIR:-$CACHE/guest}
FABRIC=${IBTCA_FABRIC:-${CARGO_TARGET_DIR:-$root/target}/release/ibtca-fabric}
iters=200 seconds=1 results=
while [ $# -gt 0 ]; do
	case "$1" in
	-h | --help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	--iters) iters=${2:?--iters needs a number}; shift 2 ;;
	--seconds) seconds=${2:?--seconds needs a number}; shift 2 ;;
	--table) results=${2:?--table needs a results file}; shift 2 ;;
	-*) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
	*) break ;;
	esac
done
case $iters in
'' | *[!0-9]* | 0*) echo "--iters takes a whole number above 0, not '$iters'" >&2; exit 2 ;;
esac
case $seconds in
'' | *[!0-9.]* | .* | *.*.*) echo "--seconds takes a number, not '$seconds'" >&2; exit 2 ;;
esac
[ $# -le 1 ] || { echo "one RUN_DIR at most (see --help)" >&2; exit 2; }

# table RESULTS: one row per window, operation and size with both paths'
# QD 1 median (p99) and rate, and DRDMA / RDMA of each; a ratio needs
# both values. Exits 1 when RESULTS shows a failed client.
table() {
	awk '
	function ratio(d, r) {
		if (d == "" || r == "" || r + 0 <= 0) return ""
		return d / r < 0.01 ? "<0.01" : sprintf("%.2f", d / r)
	}
	$1 == "DVBENCH-FAIL" { failed = 1 }
	$1 == "DVBENCH" && $2 == "verified" { verified++ }
	$1 == "DVBENCH" && NF == 11 && ($3 == "rdma" || $3 == "drdma") {
		k = $2 SUBSEP $4 SUBSEP $5
		if (!(k in seen)) { seen[k] = 1; order[n++] = k }
		med[k, $3] = $6; p99[k, $3] = $7; rate[k, $3] = $8; depth[k] = $9
	}
	END {
		print "| window | op | size | RDMA QD 1 µs (p99) | DRDMA QD 1 µs (p99) | × µs | RDMA msg/s | DRDMA msg/s | × msg/s | in flight |"
		print "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
		for (i = 0; i < n; i++) {
			k = order[i]; split(k, f, SUBSEP)
			s = f[3] >= 1024 ? (f[3] / 1024) " KiB" : f[3] " B"
			lat_r = med[k, "rdma"] == "" ? "" : med[k, "rdma"] " (" p99[k, "rdma"] ")"
			lat_d = med[k, "drdma"] == "" ? "" : med[k, "drdma"] " (" p99[k, "drdma"] ")"
			printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", f[1], toupper(f[2]), s,
				lat_r, lat_d, ratio(med[k, "drdma"], med[k, "rdma"]),
				rate[k, "rdma"], rate[k, "drdma"], ratio(rate[k, "drdma"], rate[k, "rdma"]), depth[k]
		}
		if (failed || verified < 1) {
			print "a client failed or verified nothing (DVBENCH-FAIL above, or no DVBENCH verified line)" > "/dev/stderr"
			exit 1
		}
	}' "$1"
}

if [ -n "$results" ]; then
	table "$results"
	exit
fi

C=$(readlink -f "$CACHE/chroot")
RUN=${1:-$C/tmp/drdma-verbs-bench}
# up --guests needs its run directory inside the chroot (QEMU runs there).
case "$(readlink -m "$RUN")/" in
"$C"/*) ;;
*) echo "the run directory must be inside the VM stack's chroot $C, not $RUN" >&2; exit 2 ;;
esac
[ -x "$FABRIC" ] || { echo "no $FABRIC: cargo build --release (or set IBTCA_FABRIC)" >&2; exit 1; }

mkdir -p "$(dirname "$RUN")"
cfg=$(mktemp "$C/tmp/drdma-verbs-bench.XXXXXX.json")
cat >"$cfg" <<JSON
{ "nodes": [ { "name": "n1", "lid": 1 },
             { "name": "n2", "lid": 2, "drdma_window": "mapped" } ],
  "links": [ { "a": "n1", "b": "n2" } ], "guest": { "mem": "512M" } }
JSON
client="ibtcadv-bench client"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$FABRIC" down --run-dir "$RUN" >/dev/null 2>&1 || true
rm -rf "$RUN"
status=0
"$FABRIC" up "$cfg" --run-dir "$RUN" --guests --kernel "$GUEST/vmlinuz" \
	--initrd "$GUEST/initramfs.cpio.gz" --run-vm "$root/scripts/run-vm.sh" \
	--guest-timeout 1800 --wait \
	--run "n1=ibtcadv-bench server" \
	--run "n2=$client n1 $iters $seconds" \
	--run "n2=ibtcadv-bench server" \
	--run "n1=$client n2 $iters $seconds" >&2 || status=$?
"$FABRIC" down --run-dir "$RUN" >/dev/null 2>&1 || true
rm -f "$cfg"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
cat "$RUN/n2.console" "$RUN/n1.console" | tr -d '\r' | grep -a '^DVBENCH' >"$RUN/results.txt" || true
cat "$RUN/results.txt"
[ "$status" = 0 ] || echo "ibtca-fabric up exited $status" >&2
table "$RUN/results.txt"
exit "$status"
