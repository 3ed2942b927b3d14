#!/usr/bin/env bash
# The README's main command: installs what is missing (VM stack, Rust build,
# guest module), brings up the two-node topology qemu-configs/two-nodes.json
# with `ibtca-fabric up --guests` (two ibtca devices joined by an IB link and
# two Linux guests under QEMU that bind them), and has them do RDMA to each
# other: the byte-checked verbs scenario (`ibtca-verbs verbs`: SEND/RECV,
# RDMA WRITE and READ, atomics, a bad-R_Key write that must fail), then
# rdma-core's `ibv_rc_pingpong` and perftest's `ib_write_bw`, each run by
# `--run` in the guests. Prints what each guest saw, then `ibtca-fabric down`.
#
#   scripts/demo.sh            # run the demo
#   scripts/demo.sh --keep     # leave the run directory (consoles, logs) behind
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/chroot-mounts.sh

step_name=demo.sh
. scripts/steps.sh

keep=0
[ "${1:-}" = "--keep" ] && keep=1

say "VM stack (QEMU, guest kernel) in ${IBTCA_CACHE:-$HOME/.cache/ibtca}"
step bash scripts/setup-vm-stack.sh
. "${IBTCA_CACHE:-$HOME/.cache/ibtca}/stack.env"
CHROOT=$(readlink -f "$IBTCA_CHROOT")

say "building ibtca-device, ibtca-switch and ibtca-fabric (release; cargo shows each crate)"
step cargo build --release -p ibtca-device -p ibtca-switch -p ibtca-fabric
say "building the guest module, tool and initramfs"
step bash scripts/build-guest.sh
GUEST=${IBTCA_CACHE:-$HOME/.cache/ibtca}/guest

# cargo put the binaries under $CARGO_TARGET_DIR when it is set.
fabric_bin=${CARGO_TARGET_DIR:-target}/release/ibtca-fabric
run=$(mktemp -d "$CHROOT/tmp/ibtca-demo.XXXXXX")
fab=$run/fabric
cleanup() {
	"$fabric_bin" down --run-dir "$fab" >/dev/null 2>&1 || true
	ibtca_chroot_release "$CHROOT"
	if [ "$keep" = 1 ]; then
		echo "consoles and logs kept in $run" >&2
	else
		rm -rf -- "$run"
	fi
}
trap cleanup EXIT

# A guest command whose output lines start with TAG, followed by
# "TAG exit=STATUS".
tagged() { # tagged TAG CMD
	printf '%s' "out=\$($2 2>&1); st=\$?; echo \"\$out\" | sed 's/^/$1 /'; echo \"$1 exit=\$st\"; exit \$st"
}
# The same for a client whose server starts meanwhile in the other guest:
# tried once a second until it reaches the server (its output names the
# remote address), at most 300 times; each failed try's output is kept,
# marked "TAG try N failed (exit S):".
client() { # client TAG CMD
	printf '%s' "for i in \$(seq 300); do out=\$($2 2>&1); st=\$?; if [ \$st = 0 ] || echo \"\$out\" | grep -q 'remote address'; then echo \"\$out\" | sed 's/^/$1 /'; echo \"$1 exit=\$st\"; exit \$st; fi; echo \"\$out\" | sed \"s/^/$1 try \$i failed (exit \$st): /\"; sleep 1; done; echo \"$1 exit=failed\"; exit 1"
}

say "ibtca-fabric up --guests qemu-configs/two-nodes.json: two devices (LID 1 and 2), one IB link, two guests (TCG, about 20-40 s each to boot), then three programs in each"
# The launcher starts the devices, waits for the link, then boots one guest
# per node (consoles in $fab/NODE.console); each guest runs its --run
# commands in order and stops at the first that fails; with --wait `up`
# returns when both guests have powered off.
"$fabric_bin" up qemu-configs/two-nodes.json --run-dir "$fab" \
	--guests --wait --guest-timeout 900 \
	--kernel "$GUEST/vmlinuz" --initrd "$GUEST/initramfs.cpio.gz" \
	--run "a=ibtca-verbs verbs --role server --peer-lid 2" \
	--run "b=ibtca-verbs verbs --role client --peer-lid 1" \
	--run "a=$(tagged DEMO-PP 'ibv_rc_pingpong -d ibtca0 -c')" \
	--run "b=$(client DEMO-PP 'ibv_rc_pingpong -d ibtca0 -c a')" \
	--run "a=$(tagged DEMO-BW 'ib_write_bw -d ibtca0 -D 2')" \
	--run "b=$(client DEMO-BW 'ib_write_bw -d ibtca0 -D 2 a')" || true
tr -d '\r' <"$fab/a.console" >"$run/server.console" 2>/dev/null || : >"$run/server.console"
tr -d '\r' <"$fab/b.console" >"$run/client.console" 2>/dev/null || : >"$run/client.console"

show() { # show ROLE
	local c=$run/$1.console
	echo "  $1 guest (LID $([ "$1" = server ] && echo 1 || echo 2)):"
	grep 'IBTCA-VERBS ' "$c" | sed 's/^IBTCA-VERBS /    /' || true
	grep 'IBTCA-VERBS-BENCH' "$c" | sed 's/^IBTCA-VERBS-BENCH /    measured: /' || true
	grep -m1 'IBTCA-VERBS-SUMMARY' "$c" | sed 's/^IBTCA-VERBS-SUMMARY /    result: /' || echo "    no result"
}
echo
echo "ibtca demo: two guests, two devices, one InfiniBand link"
show server
show client
c=$run/client.console
echo "  standard tools, client guest to server guest:"
# ibv_rc_pingpong's two result lines: bytes and Mbit/s, iterations and
# microseconds per round trip.
sed -n 's/^DEMO-PP \([0-9]* \(bytes\|iters\) in .*\)/    ibv_rc_pingpong: \1/p' "$c"
# ib_write_bw's result row: #bytes #iterations BW-peak BW-average MsgRate.
awk '$1 == "DEMO-BW" && $2 ~ /^[0-9]+$/ && NF >= 6 {
	printf "    ib_write_bw: %s B messages, %s MB/s average\n", $2, $5 }' "$c"
echo
ok=1
for r in server client; do
	grep -q 'IBTCA-VERBS-SUMMARY [0-9]* passed, 0 failed' "$run/$r.console" || ok=0
	for tag in DEMO-PP DEMO-BW; do
		grep -q "^$tag exit=0\$" "$run/$r.console" || ok=0
	done
done
if [ "$ok" != 1 ]; then
	echo "demo FAILED; consoles:" >&2
	cat "$run/server.console" "$run/client.console" >&2
	exit 1
fi
echo "both guests passed: RDMA between two VMs over ibtca, with the verbs scenario, ibv_rc_pingpong and ib_write_bw"
steps_done
