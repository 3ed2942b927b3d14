#!/bin/bash
# Writes the two-level fat tree of scripts/fat-tree-net.sh (same names and
# GUIDs) as an ibtca-hive file on stdout (docs/hive.md): every switch and
# CA hosted, the wires between them in memory, except that leaf1's port 1
# listens at SM_SOCKET for a subnet manager (or any node) outside instead
# of hosting ca1-1. RADIX 36: 54 switches, 647 CAs.
#
# With ROUTES=1 no SM is expected: CA ca L-P gets LID (L-1)*RADIX/2+P and
# every switch a route to every CA LID (leaves up through spine 1), so
# each forwarding table is as full as an SM would make it.
#
#   bash scripts/fat-tree-hive.sh 36 /tmp/ft/sm.link > ft648.hive.json
#   ibtca-hive --config ft648.hive.json
set -euo pipefail
radix=${1:?usage: fat-tree-hive.sh RADIX SM_SOCKET}
sm=${2:?usage: fat-tree-hive.sh RADIX SM_SOCKET}
if (( radix < 2 || radix > 254 || radix % 2 )); then
	echo "fat-tree-hive.sh: RADIX must be even, 2-254" >&2
	exit 2
fi
half=$((radix / 2))
routes=${ROUTES:-0}
managed=true
((routes)) && managed=false
# routes LEAF: the "routes" member of leaf LEAF (0: of a spine).
routes_of() {
	((routes)) || return 0
	local leaf=$1 l p sep=''
	printf ', "routes": ['
	for ((l = 1; l <= radix; l++)); do
		for ((p = 1; p <= half; p++)); do
			if ((leaf == 0)); then
				printf '%s[%d, %d]' "$sep" $(((l - 1) * half + p)) "$l"
			elif ((leaf == l)); then
				printf '%s[%d, %d]' "$sep" $(((l - 1) * half + p)) "$p"
			else
				printf '%s[%d, %d]' "$sep" $(((l - 1) * half + p)) $((half + 1))
			fi
			sep=', '
		done
	done
	printf ']'
}
sep=''
printf '{"sm_managed": %s, "switches": [' "$managed"
for ((l = 1; l <= radix; l++)); do
	printf '%s\n{"name": "leaf%d", "guid": %d, "ports": [' "$sep" "$l" $((0x20000 + l))
	for ((p = 1; p <= half; p++)); do
		if ((l == 1 && p == 1)); then
			printf '"listen:%s", ' "$sm"
		else
			printf '"hive:ca%d-%d:1", ' "$l" "$p"
		fi
	done
	for ((s = 1; s <= half; s++)); do
		printf '"hive:spine%d:%d"%s' "$s" "$l" "$( ((s < half)) && echo ', ')"
	done
	printf ']'
	routes_of "$l"
	printf '}'
	sep=','
done
for ((s = 1; s <= half; s++)); do
	printf ',\n{"name": "spine%d", "guid": %d, "ports": [' "$s" $((0x30000 + s))
	for ((l = 1; l <= radix; l++)); do
		printf '"hive:leaf%d:%d"%s' "$l" $((half + s)) "$( ((l < radix)) && echo ', ')"
	done
	printf ']'
	routes_of 0
	printf '}'
done
printf '\n], "cas": ['
sep=''
for ((l = 1; l <= radix; l++)); do
	for ((p = 1; p <= half; p++)); do
		((l == 1 && p == 1)) && continue
		printf '%s\n{"name": "ca%d-%d", "guid": %d, "lid": %d, "port": "hive:leaf%d:%d"}' \
			"$sep" "$l" "$p" $((0x100000 + (l * 256 + p) * 2)) $(((l - 1) * half + p)) "$l" "$p"
		sep=','
	done
done
printf '\n]}\n'
