#!/usr/bin/env bash
# perftest over ibtca and over soft-RoCE (rxe on the management wire) in the
# same two guests, one boot (BENCHMARKS.md, "perftest between two guests
# (ibtca against soft-RoCE)"):
#   ib_write_bw at 64 B, 4 KiB and 1 MiB, ib_send_bw 64 B, ib_write_lat,
#   ib_read_lat and ib_send_lat at 64 B, each duration-bounded (-D 2), first
#   on ibtca0, then on rxe0; n1 serves, n2 is the client (by node name).
#   The three latency tests run once more for 1000 iterations (-n 1000),
#   whose line gives the distribution (t_min, t_max, t_typical = median,
#   t_avg, t_stdev, 99 % and 99.9 %) where -D gives only the average.
#   Each row runs on its own TCP port, and a server or client that has
#   not finished in 300 s is stopped: a hung or failed row is left empty
#   and the rows after it still pair up.
#   On ibtca0 only, ib_write_bw -s 64 runs once more with
#   IBTCA_DB_RECORDS=0 in both guests (write_bw_64_nodbr): every post
#   rings the trapped SQ doorbell instead of going through the doorbell
#   records (docs/verbs-abi.md, "Doorbell records").
#   Before the guests boot, the no-VM reference of the same session:
#   `ibtca-bench verbs --only write-1m` (device to device, simulated guests)
#   and the raw Unix-socket stream it measures beside it.
#
#   scripts/perftest-table.sh [--placement nice|shared|default|split|pairs|devone] [RUN_DIR]
#                                # as root, after cargo build --release
#
# --placement: nice (default) runs both guests' QEMU at nice 19, what the
# docs/placement.md recommends without root for busy-polling guests on a small host:
# perftest polls its CQ in both single-vCPU guests, and at equal priority
# they take the CPUs from the devices' threads (ibtca-fabric then starts the
# devices with --spin-us 0: docs/placement.md, "Recorded: `ib_write_lat`
# beside niced guests").
# shared: guests at nice 0 and devices spinning, both as the file says
# (what a small host gave before the launcher chose a placement).
# default: nothing set: the placement ibtca-fabric chooses from the
# machine's CPUs (docs/placement.md; on 2 CPUs the same as nice).
# split: as nice, and n1's QEMU pinned to CPU 0, n2's to CPU 1.
# pairs: as split, and each node's device on its guest's CPU.
# devone: as split, and both devices on CPU 1.
# ibtca0 and rxe0 run in the same guests, so they share the placement.
#
# Prints the no-VM rows (NOVM ...) and each client's result line (PERFTEST
# DEVICE TEST ...) and leaves the consoles in RUN_DIR (default
# $IBTCA_CACHE/chroot/tmp/perftest-table).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${IBTCA_CACHE:-$HOME/.cache/ibtca}
C=$(readlink -f "$CACHE/chroot")
GUEST=${IBTCA_GUEST_DIR:-$CACHE/guest}
FABRIC=${IBTCA_FABRIC:-${CARGO_TARGET_DIR:-$root/target}/release/ibtca-fabric}
BENCH=${IBTCA_BENCH:-$(dirname "$FABRIC")/ibtca-bench}
placement=nice
while [ $# -gt 0 ]; do
	case "$1" in
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	--placement) placement=${2:?--placement needs nice, shared or default}; shift 2 ;;
	-*) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
	*) break ;;
	esac
done
RUN=${1:-$C/tmp/perftest-table}
n1=
n2=
case "$placement" in
nice) guest='"mem": "512M", "nice": 19' ;;
split) guest='"mem": "512M", "nice": 19' n1=', "guest": { "cpus": "0" }' n2=', "guest": { "cpus": "1" }' ;;
pairs) guest='"mem": "512M", "nice": 19' n1=', "cpus": "0", "guest": { "cpus": "0" }' n2=', "cpus": "1", "guest": { "cpus": "1" }' ;;
devone) guest='"mem": "512M", "nice": 19' n1=', "cpus": "1", "guest": { "cpus": "0" }' n2=', "cpus": "1", "guest": { "cpus": "1" }' ;;
shared) guest='"mem": "512M", "nice": 0' ;;
default) guest='"mem": "512M"' ;;
*) echo "--placement nice, shared, default, split, pairs or devone, not $placement" >&2; exit 2 ;;
esac
# up --guests needs its run directory inside the chroot (the guests' QEMU
# runs there): refuse any other before the no-VM rows spend their time.
case "$(readlink -m "$RUN")/" in
"$C"/*) ;;
*) echo "the run directory must be inside the VM stack's chroot $C, not $RUN" >&2; exit 2 ;;
esac
for b in "$FABRIC" "$BENCH"; do
	[ -x "$b" ] || { echo "no $b: cargo build --release (or set IBTCA_FABRIC, IBTCA_BENCH)" >&2; exit 1; }
done

tests=(
	"write_bw_64:ib_write_bw -s 64 -D 2"
	"write_bw_4k:ib_write_bw -s 4096 -D 2"
	"write_bw_1m:ib_write_bw -s 1048576 -D 2"
	"send_bw_64:ib_send_bw -s 64 -D 2"
	"write_lat_64:ib_write_lat -s 64 -D 2"
	"write_lat_64_n1000:ib_write_lat -s 64 -n 1000"
	"read_lat_64:ib_read_lat -s 64 -D 2"
	"read_lat_64_n1000:ib_read_lat -s 64 -n 1000"
	"send_lat_64:ib_send_lat -s 64 -D 2"
	"send_lat_64_n1000:ib_send_lat -s 64 -n 1000"
)
# The same 64 B rate without the doorbell records, on ibtca0 only.
nodbr="write_bw_64_nodbr:IBTCA_DB_RECORDS=0 ib_write_bw -s 64 -D 2"
rxe='ibtca-load-modules rxe && rdma link add rxe0 type rxe netdev eth0'
args=(--run "n1=$rxe" --run "n2=$rxe")
# Each row has its own TCP port, and both ends give up after 300 s: a
# row that fails leaves the next rows' pairs as they were.
port=18515
for dev in ibtca0 rxe0; do
	extra=()
	[ "$dev" = rxe0 ] || extra=("$nodbr")
	for t in "${tests[@]}" "${extra[@]}"; do
		port=$((port + 1))
		name=${t%%:*} cmd="timeout 300 env ${t#*:} -d $dev -p $port"
		args+=(--run "n1=$cmd >/dev/null 2>&1 || true")
		args+=(--run "n2=for i in \$(seq 120); do $cmd n1 >/tmp/o 2>&1 && break; grep -q 'remote address' /tmp/o && break; sleep 1; done; \
grep -A1 '#bytes' /tmp/o | tail -n 1 | sed 's/^/PERFTEST $dev $name /'; true")
	done
done

# The no-VM reference, in this session: device to device, and the raw
# stream beside it.
echo "placement: $placement; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$BENCH" verbs --seconds 2 --only write-1m 2>&1 | sed 's/^/NOVM /'

mkdir -p "$(dirname "$RUN")"
cfg=$(mktemp "$C/tmp/perftest-table.XXXXXX.json")
cat >"$cfg" <<JSON
{ "nodes": [ { "name": "n1", "lid": 1$n1 }, { "name": "n2", "lid": 2$n2 } ],
  "links": [ { "a": "n1", "b": "n2" } ], "guest": { $guest } }
JSON
"$FABRIC" down --run-dir "$RUN" >/dev/null 2>&1 || true
rm -rf "$RUN"
"$FABRIC" up "$cfg" --run-dir "$RUN" --guests --kernel "$GUEST/vmlinuz" \
	--initrd "$GUEST/initramfs.cpio.gz" --run-vm "$root/scripts/run-vm.sh" \
	--guest-timeout 1800 --wait "${args[@]}" >&2
"$FABRIC" down --run-dir "$RUN" >/dev/null 2>&1 || true
rm -f "$cfg"
grep -a '^PERFTEST ' "$RUN/n2.console"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
