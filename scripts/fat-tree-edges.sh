#!/usr/bin/env bash
# ib_write_bw and ib_write_lat between guests at opposite edges of a
# three-level fat tree (five switch hops), against the same writer and a
# guest on its own leaf switch (one hop), in one fabric, one boot; then
# the far route's first uplink failed at run time, OpenSM's reroute timed,
# and ib_write_bw again on the new route; then the core switch of that
# route powered off, the reroute timed, and ib_write_bw again
# (docs/host-sm.md, "Guests at the edges").
#
#   scripts/fat-tree-edges.sh [RADIX PODS] [RUN_DIR]   # as root, after
#                                                      # cargo build --release
#
# Default RADIX 36, PODS 4: the 1,296-CA tree of 180 switches
# (scripts/fat-tree-net.sh). `ibtca-fabric up --net` hosts every switch
# and guestless CA in one ibtca-hive and the three guests' CAs as
# ibtca-devices: the writer ca1-1-1 (pod 1, leaf 1-1), the near target
# ca1-1-2 (the same leaf) and the far target caPODS-H-H (H = RADIX/2: the
# last pod's last leaf); the host's OpenSM (libumad2sim) sweeps through
# the host port ca1-2-1. Prints
#   sweep      OpenSM's DISCOVERING -> SUBNET UP (its log);
#   route      ibtracert writer -> far target: the switches and ports;
#   NEAR/FAR   each client's ib_write_bw (64 KiB, -D 3) and ib_write_lat
#              (8 B, -n 1000) result line;
#   reroute    seconds from `ibtca-fabric link ... down` on the far
#              route's first uplink until ibtracert shows another route;
#   REROUTED   ib_write_bw on that route;
#   reroute    seconds from `ibtca-fabric switch CORE down` (the core
#              of that route) until ibtracert shows a route without it;
#   SWITCHED   ib_write_bw on that route.
# Each ibtracert is given 10 s (libumad2sim can hang at its exit, below)
# and tried again; no route within 120 s ends the script with the last
# ibtracert's error.
# Consoles stay in RUN_DIR (default $IBTCA_CACHE/chroot/tmp/fat-tree-edges).
# Needs opensm, infiniband-diags and libumad2sim0 (scripts/host-tools.sh).
set -euo pipefail
case "${1:-}" in
-h | --help)
	sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
	exit 0
	;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${IBTCA_CACHE:-$HOME/.cache/ibtca}
C=$(readlink -f "$CACHE/chroot")
GUEST=${IBTCA_GUEST_DIR:-$CACHE/guest}
FABRIC=${IBTCA_FABRIC:-${CARGO_TARGET_DIR:-$root/target}/release/ibtca-fabric}
UMAD2SIM=/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so
radix=36 pods=4
if [ $# -ge 2 ]; then radix=$1 pods=$2; shift 2; fi
case "$radix$pods" in
*[!0-9]* | '') echo "usage: $0 [RADIX PODS] [RUN_DIR] (numbers, not '$radix' '$pods')" >&2; exit 2 ;;
esac
RUN=${1:-$C/tmp/fat-tree-edges}
case "$(readlink -m "$RUN")/" in
"$C"/*) ;;
*) echo "the run directory must be inside the VM stack's chroot $C, not $RUN" >&2; exit 2 ;;
esac
[ -x "$FABRIC" ] || { echo "no $FABRIC: cargo build --release (or set IBTCA_FABRIC)" >&2; exit 1; }
for t in opensm ibtracert; do
	command -v "$t" >/dev/null || { echo "$t missing: scripts/host-tools.sh" >&2; exit 1; }
done
h=$((radix / 2))
writer=ca1-1-1 near=ca1-1-2 far=ca$pods-$h-$h host=ca1-2-1
# Port GUIDs (fat-tree-net.sh: CA P-I-C's node GUID is
# 0x100000000 + ((P*256+I)*256+C)*2, its port's one more).
guid() { printf '0x%x' $((0x100000000 + (($1 * 256 + $2) * 256 + $3) * 2 + 1)); }
wguid=$(guid 1 1 1) fguid=$(guid "$pods" "$h" "$h")
sock=fat-tree-edges-$$
work=$(mktemp -d "$C/tmp/fat-tree-edges.XXXXXX")
sm=
cleanup() {
	[ -z "$sm" ] || kill "$sm" 2>/dev/null || true
	"$FABRIC" down --run-dir "$RUN" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
bash "$root/scripts/fat-tree-net.sh" "$radix" "$pods" >"$work/fat-tree.net"

BW="ib_write_bw -d ibtca0 -s 65536 -D 3"
LAT="ib_write_lat -d ibtca0 -s 8 -n 1000"
active='until grep -q ACTIVE /sys/class/infiniband/ibtca0/ports/1/state; do sleep 1; done'
# A client run: retried until its server answers; its result line tagged.
client() { # TAG PERFTEST TARGET
	echo "$writer=for i in \$(seq 300); do $2 $3 >/tmp/o 2>&1 && break; grep -q 'remote address' /tmp/o && break; sleep 1; done; \
grep -A1 '#bytes' /tmp/o | tail -n 1 | sed 's/^/$1 /'"
}
args=(--run "$near=$active" --run "$near=$BW >/dev/null 2>&1" --run "$near=$LAT >/dev/null 2>&1"
	--run "$far=$active" --run "$far=$BW >/dev/null 2>&1" --run "$far=$LAT >/dev/null 2>&1"
	--run "$far=$BW >/dev/null 2>&1" --run "$far=$BW >/dev/null 2>&1"
	--run "$writer=$active"
	--run "$(client NEAR_BW "$BW" "$near")" --run "$(client NEAR_LAT "$LAT" "$near")"
	--run "$(client FAR_BW "$BW" "$far")" --run "$(client FAR_LAT "$LAT" "$far")"
	--run "$writer=echo EDGES phase1; until [ -e /ibtca/go ]; do sleep 1; done"
	--run "$(client REROUTED_BW "$BW" "$far")"
	--run "$writer=echo EDGES phase2; until [ -e /ibtca/go2 ]; do sleep 1; done"
	--run "$(client SWITCHED_BW "$BW" "$far")" --run "$writer=echo EDGES done")

echo "fat tree radix $radix, $pods pods: $(grep -c '^Ca' "$work/fat-tree.net") CAs, $(grep -c '^Switch' "$work/fat-tree.net") switches; writer $writer, near $near, far $far; load $(cut -d' ' -f1-3 /proc/loadavg)"
"$FABRIC" down --run-dir "$RUN" >/dev/null 2>&1 || true
rm -rf "$RUN"
t0=$(date +%s.%N)
"$FABRIC" up --net "$work/fat-tree.net" --run-dir "$RUN" --timeout 600 --sim-port "$host=$sock" \
	--guests --kernel "$GUEST/vmlinuz" --initrd "$GUEST/initramfs.cpio.gz" \
	--run-vm "$root/scripts/run-vm.sh" --guest-timeout 900 "${args[@]}" >"$work/up.log" 2>&1 ||
	{ cat "$work/up.log" >&2; exit 1; }
printf 'up (fabric and three guests started): %.1f s\n' "$(echo "$(date +%s.%N) - $t0" | bc)"
(cd "$work" && IBSIM_SOCKNAME=$sock LD_PRELOAD=$UMAD2SIM exec opensm -d2 -f "$work/opensm.log" >/dev/null 2>&1) &
sm=$!

# Waits (at most $2 seconds, a hang guard) until the writer's console
# has line $1.
wait_console() {
	local end=$((SECONDS + $2))
	until grep -aq "$1" "$RUN/$writer.console" 2>/dev/null; do
		[ "$SECONDS" -lt "$end" ] || { echo "no $1 in $RUN/$writer.console" >&2; tail -20 "$RUN/$writer.console" >&2; exit 1; }
		sleep 0.5
	done
}
# ibtracert writer -> far target, at most 10 s. libumad2sim (ibsim's
# umad2sim.c) can hang at exit: its atexit cleanup holds its devices'
# mutex while it joins its receiver thread, and a MAD that arrives then
# (a late answer to a retried request, common while OpenSM reroutes)
# leaves that thread waiting on the same mutex. Such an ibtracert has
# printed its whole route ("To ca ..."): `timeout` ends it and the route
# counts.
trace() {
	local rc=0 out
	out=$(cd "$work" && IBSIM_SOCKNAME=$sock LD_PRELOAD=$UMAD2SIM timeout 10 ibtracert -G "$wguid" "$fguid" 2>"$work/ibtracert.err") || rc=$?
	if [ "$rc" = 124 ] && grep -q '^To ca' <<<"$out"; then
		echo "ibtracert printed its route and hung at exit (killed after 10 s)" >&2
		rc=0
	fi
	[ "$rc" = 0 ] || { echo "rc=$rc $(tail -n 1 "$work/ibtracert.err")" >"$work/ibtracert.last"; return 1; }
	printf '%s\n' "$out"
}
switches() { grep -c -- '-> switch port' <<<"$1" || true; }
# The port leaf 1-1 sends the route out of (its line 3).
first_uplink() { sed -n 3p <<<"$1" | sed 's/^\[\([0-9]*\)\].*/\1/'; }
# Polls trace until `$1 ROUTE` holds, at most $2 seconds; prints the
# route, or ends the script with why there is none.
route_until() { # CHECK SECONDS WHAT
	local end=$((SECONDS + $2)) r
	while :; do
		if r=$(trace) && "$1" "$r"; then
			printf '%s\n' "$r"
			return
		fi
		if [ "$SECONDS" -ge "$end" ]; then
			local last="a route that is not it"
			[ ! -s "$work/ibtracert.last" ] || last=$(cat "$work/ibtracert.last")
			case "$last" in rc=124*) last="no answer within 10 s (killed)" ;; esac
			echo "no route $writer -> $far $3 within $2 s; last ibtracert: $last (OpenSM: $work/opensm.log)" >&2
			exit 1
		fi
		rm -f "$work/ibtracert.last"
		sleep 0.2
	done
}
any_route() { [ "$(switches "$1")" -ge 1 ]; }
wait_console 'EDGES phase1' 600
# OpenSM flushes its log line by line (-d2): its first sweep.
log_time() { awk '{ split($3, t, ":"); printf "%.3f\n", t[1] * 3600 + t[2] * 60 + t[3] + $4 / 1e6; exit }'; }
d0=$(grep -m1 'Entering DISCOVERING state' "$work/opensm.log" | log_time || true)
d1=$(grep -m1 'SUBNET UP' "$work/opensm.log" | log_time || true)
[ -z "$d0" ] || [ -z "$d1" ] || awk -v a="$d0" -v b="$d1" 'BEGIN { printf "sweep %.2f s\n", b - a }'
route=$(route_until any_route 120 "from OpenSM's sweep")
echo "route $writer -> $far:"
sed 's/^/  /' <<<"$route"
hops=$(switches "$route")
echo "switches on the route: $hops"
grep -a -E '^(NEAR|FAR)_' "$RUN/$writer.console" | tr -d '\r'

# Runs `ibtca-fabric ARGS...` that fails WHAT, times until ibtracert
# shows a route CHECK accepts, and prints it; the route is left in $new.
fail() { # WHAT CHECK ARGS...
	local what=$1 check=$2 t0
	shift 2
	"$FABRIC" "$@"
	t0=$(date +%s.%N)
	new=$(route_until "$check" 120 "around $what")
	printf 'reroute after %s down: %.2f s\n' "$what" "$(echo "$(date +%s.%N) - $t0" | bc)"
	sed 's/^/  /' <<<"$new"
}

# Fail the far route's first uplink (the port leaf 1-1 sends it out of).
uplink=$(first_uplink "$route")
around_link() { [ "$(switches "$1")" = "$hops" ] && [ "$(first_uplink "$1")" != "$uplink" ]; }
fail "leaf1-1:$uplink" around_link link --run-dir "$RUN" "leaf1-1:$uplink" down
: >"$RUN/$writer.guest/go"
wait_console 'EDGES phase2' 300
grep -a '^REROUTED_' "$RUN/$writer.console" | tr -d '\r'

# Power off the core switch of the route in use (its line 4); the
# other cores of its group are the way around it.
core=$(sed -n 4p <<<"$new" | sed 's/.*"\(.*\)"$/\1/')
around_core() { [ "$(switches "$1")" = "$hops" ] && ! grep -qF "\"$core\"" <<<"$1"; }
fail "switch ${core// /}" around_core switch --run-dir "$RUN" "${core// /}" down
: >"$RUN/$writer.guest/go2"
wait_console 'EDGES done' 300
grep -a '^SWITCHED_' "$RUN/$writer.console" | tr -d '\r'
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
