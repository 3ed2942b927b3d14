#!/usr/bin/env bash
# perftest over ibtca and over soft-RoCE (rxe on the management wire) in the
# same two guests, one boot (BENCHMARKS.md's perftest table):
#   ib_write_bw at 64 B, 4 KiB and 1 MiB, ib_send_bw 64 B, ib_write_lat,
#   ib_read_lat and ib_send_lat at 64 B, each duration-bounded (-D 2), first
#   on ibtca0, then on rxe0; n1 serves, n2 is the client (by node name).
#
#   scripts/perftest-table.sh [RUN_DIR]     # as root, after cargo build --release
#
# Prints each client's result line (tagged DEVICE TEST) and leaves the
# consoles in RUN_DIR (default $IBTCA_CACHE/chroot/tmp/perftest-table).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${IBTCA_CACHE:-$HOME/.cache/ibtca}
C=$(readlink -f "$CACHE/chroot")
RUN=${1:-$C/tmp/perftest-table}
GUEST=${IBTCA_GUEST_DIR:-$CACHE/guest}
FABRIC=${IBTCA_FABRIC:-$root/target/release/ibtca-fabric}
case "${1:-}" in -h | --help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
[ -x "$FABRIC" ] || { echo "no $FABRIC: cargo build --release (or set IBTCA_FABRIC)" >&2; exit 1; }

tests=(
	"write_bw_64:ib_write_bw -s 64 -D 2"
	"write_bw_4k:ib_write_bw -s 4096 -D 2"
	"write_bw_1m:ib_write_bw -s 1048576 -D 2"
	"send_bw_64:ib_send_bw -s 64 -D 2"
	"write_lat_64:ib_write_lat -s 64 -D 2"
	"read_lat_64:ib_read_lat -s 64 -D 2"
	"send_lat_64:ib_send_lat -s 64 -D 2"
)
rxe='ibtca-load-modules rxe && rdma link add rxe0 type rxe netdev eth0'
args=(--run "n1=$rxe" --run "n2=$rxe")
for dev in ibtca0 rxe0; do
	for t in "${tests[@]}"; do
		name=${t%%:*} cmd="${t#*:} -d $dev"
		args+=(--run "n1=$cmd >/dev/null 2>&1 || true")
		args+=(--run "n2=for i in \$(seq 120); do $cmd n1 >/tmp/o 2>&1 && break; grep -q 'remote address' /tmp/o && break; sleep 1; done; \
grep -A1 '#bytes' /tmp/o | tail -n 1 | sed 's/^/PERFTEST $dev $name /'; true")
	done
done
mkdir -p "$(dirname "$RUN")"
cfg=$(mktemp "$C/tmp/perftest-table.XXXXXX.json")
cat >"$cfg" <<'JSON'
{ "nodes": [ { "name": "n1", "lid": 1 }, { "name": "n2", "lid": 2 } ],
  "links": [ { "a": "n1", "b": "n2" } ], "guest": { "mem": "512M" } }
JSON
"$FABRIC" down --run-dir "$RUN" >/dev/null 2>&1 || true
rm -rf "$RUN"
"$FABRIC" up "$cfg" --run-dir "$RUN" --guests --kernel "$GUEST/vmlinuz" \
	--initrd "$GUEST/initramfs.cpio.gz" --run-vm "$root/scripts/run-vm.sh" \
	--guest-timeout 1800 --wait "${args[@]}" >&2
"$FABRIC" down --run-dir "$RUN" >/dev/null 2>&1 || true
rm -f "$cfg"
grep -a '^PERFTEST ' "$RUN/n2.console"
