#!/usr/bin/env bash
# Host tools the tests need besides the VM stack: tshark, which decodes the
# fabric's packet captures (pcap/ERF, InfiniBand). Installed with apt when
# missing and run as root; otherwise says how to install it (the capture
# tests fail with a clear message without it).
#
#   scripts/host-tools.sh
set -euo pipefail

log() { printf '[host-tools] %s\n' "$*" >&2; }

command -v tshark >/dev/null && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
	log "tshark is missing: install it (apt-get install tshark) for the capture tests"
	exit 0
fi
log "installing tshark"
export DEBIAN_FRONTEND=noninteractive
# wireshark-common asks whether non-root users may capture: no.
echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
apt-get update -qq
apt-get install -y -qq --no-install-recommends tshark >/dev/null
