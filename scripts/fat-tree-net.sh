#!/bin/bash
# Writes a two-level fat tree of RADIX-port switches as an ibsim /
# ibnetdiscover net file on stdout (docs/net-files.md): RADIX leaf
# switches, each with RADIX/2 CAs on its ports 1..RADIX/2 and one link
# from each port RADIX/2+j to spine j's port (leaf number); RADIX/2 spine
# switches. RADIX 36: 648 CAs, 54 switches.
#
#   bash scripts/fat-tree-net.sh 36 > fat-tree-648.net
#   ibtca-fabric up --net fat-tree-648.net --run-dir /tmp/ft
set -euo pipefail
radix=${1:?usage: fat-tree-net.sh RADIX (even, 2-254)}
if (( radix < 2 || radix > 254 || radix % 2 )); then
	echo "fat-tree-net.sh: RADIX must be even, 2-254" >&2
	exit 2
fi
half=$((radix / 2))
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
