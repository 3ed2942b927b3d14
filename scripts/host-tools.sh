#!/usr/bin/env bash
# Host tools the tests need besides the VM stack: tshark, which decodes the
# fabric's packet captures (pcap/ERF, InfiniBand), Graphviz's `dot`, which
# renders `ibtca-fabric graph --svg`, OpenSM, infiniband-diags, libumad2sim
# and ibsim for host programs on a fabric (fabric_host_sm,
# docs/host-sm.md), and nftables' `nft`, with which the cross-host test
# drops packets where the kernel has no netem. Installed with apt when
# missing and run as root; otherwise says how to install them (the tests
# that need them fail with a clear message without them).
#
#   scripts/host-tools.sh
set -euo pipefail

log() { printf '[host-tools] %s\n' "$*" >&2; }

missing=()
command -v tshark >/dev/null || missing+=(tshark)
command -v dot >/dev/null || missing+=(graphviz)
# Host OpenSM and infiniband-diags on a fabric through ibtca-simport
# (docs/host-sm.md): Debian's libumad2sim, and ibsim itself to compare.
command -v opensm >/dev/null || missing+=(opensm)
command -v ibnetdiscover >/dev/null || missing+=(infiniband-diags)
[ -e /usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so ] || missing+=(libumad2sim0)
command -v ibsim >/dev/null || missing+=(ibsim-utils)
command -v nft >/dev/null || missing+=(nftables)
[ ${#missing[@]} = 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
	log "missing: ${missing[*]}: install them (apt-get install ${missing[*]}) for the capture, graph, host-SM and cross-host tests"
	exit 0
fi
log "installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# wireshark-common asks whether non-root users may capture: no.
echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
