#!/bin/bash
# Writes a dragonfly as an ibsim / ibnetdiscover net file on stdout
# (docs/topologies.md), with node names and GUIDs that both ibsim and
# `ibtca-fabric up --net` load.
#
# A switches per group, P CAs per switch, H global links per switch,
# GROUPS groups (2..A*H+1; default A*H+1, the largest, where every pair of
# groups has one global link). Switch "gG-sS" (1-based) has its CAs
# "gG-sS-cC" on ports 1..P, a link to each other switch of its group on
# ports P+1..P+A-1 (all-to-all, in switch order), and its global ports
# P+A..P+A+H-1. Group G's k-th global link (k = 0..GROUPS-2; switch
# k/H+1, global port k%H) goes to group (G+k+1) mod GROUPS, arriving on
# that group's link GROUPS-2-k; global ports past GROUPS-2 stay unlinked.
# Switches: GROUPS*A; CAs: GROUPS*A*P; links: CAs + GROUPS*A*(A-1)/2 +
# GROUPS*(GROUPS-1)/2. The balanced dragonfly is A = 2P = 2H.
#
#   bash scripts/dragonfly-net.sh 4 2 2 > df.net    # 9 groups: 36 switches, 72 CAs
#   bash scripts/dragonfly-net.sh 8 4 4 > df.net    # 33 groups: 264 switches, 1,056 CAs
#   ibtca-fabric up --net df.net --run-dir /tmp/df
set -euo pipefail
usage="usage: dragonfly-net.sh A (switches per group) P (CAs per switch) H (global links per switch) [GROUPS]"
a=${1:?$usage}
p=${2:?$usage}
h=${3:?$usage}
for v in "$a" "$p" "$h"; do
	if ! [[ $v =~ ^[0-9]+$ ]] || (( v < 1 )); then
		echo "dragonfly-net.sh: A, P and H must be positive numbers" >&2
		exit 2
	fi
done
max=$((a * h + 1))
g=${4:-$max}
if ! [[ $g =~ ^[0-9]+$ ]] || (( g < 2 || g > max )); then
	echo "dragonfly-net.sh: GROUPS must be 2-$max (A*H+1)" >&2
	exit 2
fi
ports=$((p + a - 1 + h))
if (( ports > 254 )); then
	echo "dragonfly-net.sh: P+A-1+H = $ports ports is over 254" >&2
	exit 2
fi

echo "# dragonfly: $g groups of $a switches ($ports ports: $p CAs, $((a - 1)) local, $h global), $((g * a * p)) CAs"
for ((G = 0; G < g; G++)); do
	for ((s = 0; s < a; s++)); do
		me="g$((G + 1))-s$((s + 1))"
		printf '\nswitchguid=0x%x\nSwitch\t%d "%s"\t# "%s"\n' $((0x50000 + G * a + s)) "$ports" "$me" "$me"
		for ((c = 1; c <= p; c++)); do
			printf '[%d]\t"%s-c%d"[1]\n' "$c" "$me" "$c"
		done
		# Local: switch j is on port p+1+j below s, p+j above; s on j's
		# port likewise.
		for ((j = 0; j < a; j++)); do
			(( j == s )) && continue
			if (( j < s )); then mine=$((p + 1 + j)); else mine=$((p + j)); fi
			if (( s < j )); then theirs=$((p + 1 + s)); else theirs=$((p + s)); fi
			printf '[%d]\t"g%d-s%d"[%d]\n' "$mine" $((G + 1)) $((j + 1)) "$theirs"
		done
		for ((t = 0; t < h; t++)); do
			k=$((s * h + t))
			(( k > g - 2 )) && continue
			other=$(((G + k + 1) % g))
			back=$((g - 2 - k))
			printf '[%d]\t"g%d-s%d"[%d]\n' $((p + a + t)) $((other + 1)) $((back / h + 1)) $((p + a + back % h))
		done
	done
done
for ((G = 0; G < g; G++)); do
	for ((s = 0; s < a; s++)); do
		me="g$((G + 1))-s$((s + 1))"
		for ((c = 1; c <= p; c++)); do
			printf '\ncaguid=0x%x\nCa\t1 "%s-c%d"\t# "host %s-c%d"\n[1]\t"%s"[%d]\n' \
				$((0x100000 + ((G * a + s) * 256 + c) * 2)) "$me" "$c" "$me" "$c" "$me" "$c"
		done
	done
done
