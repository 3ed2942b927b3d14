#!/usr/bin/env bash
# NVMe over Fabrics between two guests, measured (BENCHMARKS.md's
# "upper-layer protocols" table): the nvmet-rdma target of
# scripts/ulp-guest.sh in n1, the host in n2, fio on namespace 1
# (null_blk, memory-backed, filled first) for 20 s each:
#   randread-4k-qd16   4 KiB random reads at queue depth 16: IOPS
#   seqread-128k       128 KiB sequential reads at queue depth 16: MB/s
# Prints one ULP-BENCH line per test and leaves the consoles in RUN_DIR
# (default $IBTCA_CACHE/chroot/tmp/ulp-bench).
#
#   scripts/ulp-bench.sh [--transport rxe|ibtca] [RUN_DIR]
#                                # as root, after cargo build --release
#
# rxe (the default) is soft-RoCE on the management wire, the table's
# baseline; ibtca needs IPoIB (docs/ulp.md). IBTCA_FABRIC and
# IBTCA_GUEST_DIR override the launcher and the guest image.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/ulp-guest.sh"
CACHE=${IBTCA_CACHE:-$HOME/.cache/ibtca}
C=$(readlink -f "$CACHE/chroot")
GUEST=${IBTCA_GUEST_DIR:-$CACHE/guest}
FABRIC=${IBTCA_FABRIC:-${CARGO_TARGET_DIR:-$root/target}/release/ibtca-fabric}
transport=rxe
while [ $# -gt 0 ]; do
	case "$1" in
	-h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	--transport) transport=${2:?--transport needs rxe or ibtca}; shift 2 ;;
	-*) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
	*) break ;;
	esac
done
ulp_transport "$transport"
RUN=${1:-$C/tmp/ulp-bench}
[ -x "$FABRIC" ] || { echo "no $FABRIC: cargo build --release (or set IBTCA_FABRIC)" >&2; exit 1; }
missing=$(ulp_missing "$GUEST")
[ -z "$missing" ] || { echo "ulp-bench: $missing" >&2; exit 1; }

# bench NAME FIO_ARGS: one time-based fio run on namespace 1, its result
# from fio's terse line (field 7: read KiB/s, 8: read IOPS).
bench() {
	echo "fio --name=$1 --filename=\$ns1 --ioengine=libaio --direct=1 --size=64M" \
		"--time_based --runtime=20 --output-format=terse $2 >/tmp/$1.terse 2>&1 || rc=1;" \
		"awk -F';' 'NF > 8 { printf \"ULP-BENCH $ULP_TRANSPORT $1 iops=%s MB/s=%.1f\\n\", \$8, \$7 * 1024 / 1e6 }' /tmp/$1.terse"
}
body="fio --name=fill --filename=\$ns1 --ioengine=libaio --direct=1 --rw=write --bs=1M --size=64M >/dev/null || rc=1
$(bench randread-4k-qd16 "--rw=randread --bs=4k --iodepth=16")
$(bench seqread-128k "--rw=read --bs=128k --iodepth=16")"

"$FABRIC" down --run-dir "$RUN" >/dev/null 2>&1 || true
rm -rf -- "$RUN"
mkdir -p "$RUN"
share=$(mktemp -d "${TMPDIR:-/tmp}/ibtca-ulp-bench-share.XXXXXX")
trap '"$FABRIC" down --run-dir "$RUN/fabric" >/dev/null 2>&1 || true; rm -rf -- "$share"' EXIT
ulp_up "$FABRIC" "$RUN/fabric" "$GUEST" "$share" \
	"$(ulp_setup 1)" "$(ulp_target)" -- "$(ulp_setup 2)" "$(ulp_host "$body")" >"$RUN/up.log" 2>&1 || {
	tail -n 20 "$RUN/up.log" >&2
	grep -h 'ULP-MISSING\|WAIT-TIMEOUT' "$RUN"/fabric/n*.console >&2 || true
	exit 1
}
grep -h '^ULP-BENCH ' "$RUN/fabric/n2.console"
