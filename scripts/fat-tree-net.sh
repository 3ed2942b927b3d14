#!/bin/bash
# Writes a fat tree of RADIX-port switches as an ibsim / ibnetdiscover net
# file on stdout (docs/net-files.md), with node names and GUIDs that both
# ibsim and `ibtca-fabric up --net` load.
#
# Two levels (no PODS): RADIX leaf switches "leafL", each with RADIX/2 CAs
# "caL-P" on its ports 1..RADIX/2 and one link from each port RADIX/2+j
# to spine j's port L; RADIX/2 spine switches "spineJ". RADIX 36: 648 CAs,
# 54 switches.
#
# Three levels (PODS, 1..RADIX): PODS pods, each of RADIX/2 leaves
# "leafP-I" (CAs "caP-I-C" on ports 1..RADIX/2) and RADIX/2 aggregation
# switches "aggP-J"; leaf I's port RADIX/2+J goes to agg J's port I. The
# RADIX/2 uplinks of agg J (ports RADIX/2+1..RADIX) go to core group J:
# each pod's agg J has M parallel links to each of the group's
# RADIX/2/M cores "coreJ-K", M the largest divisor of RADIX/2 with
# M*PODS <= RADIX (so a core's ports are used as fully as the group
# allows); core port (P-1)*M+T is pod P's T-th link. Every CA keeps full
# bisection bandwidth. With RADIX 36: CAs = PODS*324; switches =
# PODS*36 + 324/M:
#   PODS  4:  1,296 CAs,   180 switches     PODS 16:  5,184 CAs,   738
#   PODS  8:  2,592 CAs,   396              PODS 36: 11,664 CAs, 1,620
#
#   bash scripts/fat-tree-net.sh 36 > fat-tree-648.net
#   bash scripts/fat-tree-net.sh 36 4 > fat-tree-1296.net
#   ibtca-fabric up --net fat-tree-1296.net --run-dir /tmp/ft
set -euo pipefail
radix=${1:?usage: fat-tree-net.sh RADIX (even, 2-254) [PODS (1-RADIX)]}
pods=${2:-}
if (( radix < 2 || radix > 254 || radix % 2 )); then
	echo "fat-tree-net.sh: RADIX must be even, 2-254" >&2
	exit 2
fi
half=$((radix / 2))

if [ -z "$pods" ]; then
	echo "# two-level fat tree: $radix leaves, $half spines, $((radix * half)) CAs"
	for ((l = 1; l <= radix; l++)); do
		printf '\nswitchguid=0x%x\nSwitch\t%d "leaf%d"\t# "leaf %d"\n' $((0x20000 + l)) "$radix" "$l" "$l"
		for ((p = 1; p <= half; p++)); do
			printf '[%d]\t"ca%d-%d"[1]\n' "$p" "$l" "$p"
		done
		for ((s = 1; s <= half; s++)); do
			printf '[%d]\t"spine%d"[%d]\n' $((half + s)) "$s" "$l"
		done
	done
	for ((s = 1; s <= half; s++)); do
		printf '\nswitchguid=0x%x\nSwitch\t%d "spine%d"\t# "spine %d"\n' $((0x30000 + s)) "$radix" "$s" "$s"
		for ((l = 1; l <= radix; l++)); do
			printf '[%d]\t"leaf%d"[%d]\n' "$l" "$l" $((half + s))
		done
	done
	for ((l = 1; l <= radix; l++)); do
		for ((p = 1; p <= half; p++)); do
			printf '\ncaguid=0x%x\nCa\t1 "ca%d-%d"\t# "host %d-%d"\n[1]\t"leaf%d"[%d]\n' \
				$((0x100000 + (l * 256 + p) * 2)) "$l" "$p" "$l" "$p" "$l" "$p"
		done
	done
	exit 0
fi

if (( pods < 1 || pods > radix )); then
	echo "fat-tree-net.sh: PODS must be 1-$radix" >&2
	exit 2
fi
# m: parallel links between an agg and each core of its group.
for ((m = half; m >= 1; m--)); do
	(( half % m == 0 && m * pods <= radix )) && break
done
cores=$((half / m))
echo "# three-level fat tree: $pods pods of $half leaves and $half aggs," \
	"$((half * cores)) cores ($m links per agg-core pair), $((pods * half * half)) CAs"
for ((p = 1; p <= pods; p++)); do
	for ((i = 1; i <= half; i++)); do
		printf '\nswitchguid=0x%x\nSwitch\t%d "leaf%d-%d"\t# "leaf %d-%d"\n' \
			$((0x2000000 + p * 256 + i)) "$radix" "$p" "$i" "$p" "$i"
		for ((c = 1; c <= half; c++)); do
			printf '[%d]\t"ca%d-%d-%d"[1]\n' "$c" "$p" "$i" "$c"
		done
		for ((j = 1; j <= half; j++)); do
			printf '[%d]\t"agg%d-%d"[%d]\n' $((half + j)) "$p" "$j" "$i"
		done
	done
	for ((j = 1; j <= half; j++)); do
		printf '\nswitchguid=0x%x\nSwitch\t%d "agg%d-%d"\t# "agg %d-%d"\n' \
			$((0x3000000 + p * 256 + j)) "$radix" "$p" "$j" "$p" "$j"
		for ((i = 1; i <= half; i++)); do
			printf '[%d]\t"leaf%d-%d"[%d]\n' "$i" "$p" "$i" $((half + j))
		done
		for ((u = 0; u < half; u++)); do
			printf '[%d]\t"core%d-%d"[%d]\n' $((half + 1 + u)) "$j" $((u / m + 1)) \
				$(((p - 1) * m + u % m + 1))
		done
	done
done
for ((j = 1; j <= half; j++)); do
	for ((k = 1; k <= cores; k++)); do
		printf '\nswitchguid=0x%x\nSwitch\t%d "core%d-%d"\t# "core %d-%d"\n' \
			$((0x4000000 + j * 256 + k)) "$radix" "$j" "$k" "$j" "$k"
		for ((p = 1; p <= pods; p++)); do
			for ((t = 1; t <= m; t++)); do
				printf '[%d]\t"agg%d-%d"[%d]\n' $(((p - 1) * m + t)) "$p" "$j" \
					$((half + (k - 1) * m + t))
			done
		done
	done
done
for ((p = 1; p <= pods; p++)); do
	for ((i = 1; i <= half; i++)); do
		for ((c = 1; c <= half; c++)); do
			printf '\ncaguid=0x%x\nCa\t1 "ca%d-%d-%d"\t# "host %d-%d-%d"\n[1]\t"leaf%d-%d"[%d]\n' \
				$((0x100000000 + ((p * 256 + i) * 256 + c) * 2)) "$p" "$i" "$c" "$p" "$i" "$c" "$p" "$i" "$c"
		done
	done
done
