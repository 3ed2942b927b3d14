#!/bin/bash
# Writes a 2D or 3D torus of switches as an ibsim / ibnetdiscover net file
# on stdout (docs/topologies.md), with node names and GUIDs that both
# ibsim and `ibtca-fabric up --net` load.
#
# DIMS is XxY or XxYxZ (each 1-64): one switch "sw-X-Y[-Z]" (0-based
# coordinates) at every point, CAS CAs (default 1) "ca-X-Y[-Z]-C" on its
# ports 1..CAS, then per dimension d a port to the next switch along d
# (port CAS+2d+1, wrapping round) and one to the previous (CAS+2d+2). A
# dimension of size 2 gives two parallel links between its two switches;
# size 1 none. Switches: X*Y*Z; CAs: switches*CAS; links: CAs +
# switches * (dimensions of size >= 2).
#
#   bash scripts/torus-net.sh 8x8 > torus-8x8.net          # 64 switches, 64 CAs
#   bash scripts/torus-net.sh 4x4x4 2 > torus-4x4x4.net    # 64 switches, 128 CAs
#   ibtca-fabric up --net torus-8x8.net --run-dir /tmp/torus
set -euo pipefail
usage="usage: torus-net.sh XxY[xZ] (each 1-64) [CAS per switch, 1-16]"
dims=${1:?$usage}
cas=${2:-1}
IFS=x read -r -a size <<<"$dims"
n=${#size[@]}
if (( n < 2 || n > 3 )); then
	echo "torus-net.sh: DIMS must be XxY or XxYxZ" >&2
	exit 2
fi
for s in "${size[@]}"; do
	if ! [[ $s =~ ^[0-9]+$ ]] || (( s < 1 || s > 64 )); then
		echo "torus-net.sh: each dimension must be 1-64" >&2
		exit 2
	fi
done
if ! [[ $cas =~ ^[0-9]+$ ]] || (( cas < 1 || cas > 16 )); then
	echo "torus-net.sh: CAS must be 1-16" >&2
	exit 2
fi
(( n == 2 )) && size+=(1)
sx=${size[0]} sy=${size[1]} sz=${size[2]}
total=$((sx * sy * sz))
ports=$((cas + 2 * n))

# name X Y Z: a switch's name (2D names have no Z).
name() {
	if (( n == 2 )); then echo "sw-$1-$2"; else echo "sw-$1-$2-$3"; fi
}

echo "# ${n}D torus $dims: $total switches of $ports ports, $((total * cas)) CAs"
for ((x = 0; x < sx; x++)); do
	for ((y = 0; y < sy; y++)); do
		for ((z = 0; z < sz; z++)); do
			i=$(((x * sy + y) * sz + z))
			me=$(name $x $y $z)
			printf '\nswitchguid=0x%x\nSwitch\t%d "%s"\t# "%s"\n' $((0x40000 + i)) "$ports" "$me" "$me"
			for ((c = 1; c <= cas; c++)); do
				printf '[%d]\t"ca-%s-%d"[1]\n' "$c" "${me#sw-}" "$c"
			done
			for ((d = 0; d < n; d++)); do
				(( size[d] < 2 )) && continue
				for step in 1 -1; do
					local_x=$x local_y=$y local_z=$z
					case $d in
					0) local_x=$(((x + step + sx) % sx)) ;;
					1) local_y=$(((y + step + sy) % sy)) ;;
					2) local_z=$(((z + step + sz) % sz)) ;;
					esac
					if (( step == 1 )); then
						mine=$((cas + 2 * d + 1)) theirs=$((cas + 2 * d + 2))
					else
						mine=$((cas + 2 * d + 2)) theirs=$((cas + 2 * d + 1))
					fi
					printf '[%d]\t"%s"[%d]\n' "$mine" "$(name $local_x $local_y $local_z)" "$theirs"
				done
			done
		done
	done
done
for ((x = 0; x < sx; x++)); do
	for ((y = 0; y < sy; y++)); do
		for ((z = 0; z < sz; z++)); do
			i=$(((x * sy + y) * sz + z))
			me=$(name $x $y $z)
			for ((c = 1; c <= cas; c++)); do
				printf '\ncaguid=0x%x\nCa\t1 "ca-%s-%d"\t# "host %s-%d"\n[1]\t"%s"[%d]\n' \
					$((0x100000 + (i * 16 + c) * 2)) "${me#sw-}" "$c" "${me#sw-}" "$c" "$me" "$c"
			done
		done
	done
done
