#!/usr/bin/env bash
# The storage demo: two guests on an ibtca fabric that OpenSM (in n1's
# guest) brings up; an NVMe over Fabrics target (nvmet-rdma: a null_blk
# namespace and a file-backed one) in n1 and the host (nvme-rdma) in n2,
# which discovers and connects to it and runs fio random and sequential
# writes, each read back with --verify=crc32c, on both namespaces. One
# screen of output, then `ibtca-fabric down`.
#
#   scripts/demo-storage.sh                    # over ibtca: IPoIB on ib0
#   scripts/demo-storage.sh --transport rxe    # over soft-RoCE on eth0
#   scripts/demo-storage.sh --keep             # keep consoles and logs
#
# rdma_cm finds its peer by IP address: over ibtca that is IPoIB (ib0, the
# broadcast group joined through OpenSM's SA); `--transport rxe` runs the
# same demo on soft-RoCE over the management wire, for comparison. A guest
# image without the ipoib module group stops the ibtca run with what is
# missing (docs/ulp.md).
# IBTCA_FABRIC and IBTCA_GUEST_DIR override the launcher and guest image.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/chroot-mounts.sh
. scripts/ulp-guest.sh
step_name=demo-storage.sh
. scripts/steps.sh

keep=0
transport=ibtca
while [ $# -gt 0 ]; do
	case "$1" in
	--transport)
		[ $# -ge 2 ] || { echo "--transport needs rxe or ibtca (see --help)" >&2; exit 2; }
		transport=$2
		shift 2
		;;
	--keep) keep=1; shift ;;
	-h | --help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
done
ulp_transport "$transport"

say "VM stack (QEMU, guest kernel) in ${IBTCA_CACHE:-$HOME/.cache/ibtca}"
step bash scripts/setup-vm-stack.sh
. "${IBTCA_CACHE:-$HOME/.cache/ibtca}/stack.env"
CHROOT=$(readlink -f "$IBTCA_CHROOT")
fabric_bin=${IBTCA_FABRIC:-${CARGO_TARGET_DIR:-target}/release/ibtca-fabric}
if [ -z "${IBTCA_FABRIC:-}" ]; then
	say "building ibtca-device, ibtca-switch and ibtca-fabric (release)"
	step cargo build --release -p ibtca-device -p ibtca-switch -p ibtca-fabric
fi
GUEST=${IBTCA_GUEST_DIR:-${IBTCA_CACHE:-$HOME/.cache/ibtca}/guest}
if [ -z "${IBTCA_GUEST_DIR:-}" ]; then
	say "building the guest image"
	step bash scripts/build-guest.sh
fi
missing=$(ulp_missing "$GUEST")
if [ -n "$missing" ]; then
	echo "demo-storage: cannot run NVMe over Fabrics over ibtca: $missing" >&2
	exit 1
fi

run=$(mktemp -d "$CHROOT/tmp/ibtca-demo-storage.XXXXXX")
fab=$run/fabric
share=$(mktemp -d "${TMPDIR:-/tmp}/ibtca-demo-storage-share.XXXXXX")
cleanup() {
	"$fabric_bin" down --run-dir "$fab" >/dev/null 2>&1 || true
	ibtca_chroot_release "$CHROOT"
	rm -rf -- "$share"
	if [ "$keep" = 1 ]; then
		echo "consoles and logs kept in $run" >&2
	else
		rm -rf -- "$run"
	fi
}
trap cleanup EXIT

# fio JOB NS ARGS...: 16 MiB written, then read back and checked.
fio_job() {
	local job=$1 ns=$2
	shift 2
	echo "fio --name=$job --filename=\$$ns --ioengine=libaio --direct=1 --size=16M" \
		"--verify=crc32c --verify_fatal=1 --verify_state_save=0 $* >/tmp/$job.log 2>&1;" \
		"s=\$?; [ \$s = 0 ] || rc=\$s;" \
		"echo \"ULP-FIO $job $ns status=\$s \$(sed -nE 's/^ +(READ|WRITE): bw=([^ ,]+).*/\\1 \\2/p' /tmp/$job.log | tr '\\n' ' ')\""
}
body="$(fio_job rand-4k ns1 --rw=randwrite --bs=4k --iodepth=16)
$(fio_job seq-128k ns1 --rw=write --bs=128k --iodepth=4)
$(fio_job rand-4k ns2 --rw=randwrite --bs=4k --iodepth=16)
$(fio_job seq-128k ns2 --rw=write --bs=128k --iodepth=4)"

say "ibtca-fabric up: two guests, OpenSM in n1, NVMe-oF over $ULP_LABEL (TCG: a few minutes)"
ulp_up "$fabric_bin" "$fab" "$GUEST" "$share" \
	"$(ulp_setup 1)" "$(ulp_target)" -- "$(ulp_setup 2)" "$(ulp_host "$body")" \
	>"$run/up.log" 2>&1 || tail -n 5 "$run/up.log" >&2

c1=$fab/n1.console
c2=$fab/n2.console
echo
echo "ibtca storage demo: NVMe over Fabrics between two guests over $ULP_LABEL"
grep -h '^ULP-PORT ' "$c1" "$c2" 2>/dev/null | sed 's/^ULP-PORT /  IB port (OpenSM): /' || true
grep -h '^ULP-ADDR ' "$c1" "$c2" 2>/dev/null | sed 's/^ULP-ADDR /  address: /' || true
grep -h '^ULP-MISSING ' "$c1" "$c2" 2>/dev/null | sed 's/^ULP-MISSING /  MISSING: /' || true
grep -m1 '^ULP-TARGET ' "$c1" 2>/dev/null | sed 's/^ULP-TARGET /  target n1: /' || true
grep -m1 'subnqn: *nqn.2026' "$c2" 2>/dev/null | sed 's/^ULP-DISCOVER */  host n2 discovered: /' || true
grep -m1 '^ULP-CONNECT ' "$c2" 2>/dev/null | sed 's/^ULP-CONNECT /  host n2: /' || true
grep -m1 '^ULP-NS ' "$c2" 2>/dev/null | sed 's/^ULP-NS /  namespaces 1 and 2: /' || true
grep '^ULP-FIO ' "$c2" 2>/dev/null |
	sed -E 's/^ULP-FIO ([^ ]+) ([^ ]+) (status=[0-9]+) (.*)/  fio \1 on \2, 16 MiB written and verified: \3 \4/' || true
echo
if [ "$(grep -c '^ULP-FIO .* status=0 ' "$c2" 2>/dev/null)" = 4 ] &&
	grep -q '^IBTCA-RUN 2 exit=0' "$c2"; then
	echo "passed: every block written over NVMe-oF read back with its crc32c intact"
	steps_done
else
	echo "demo FAILED; the host's console:" >&2
	grep -v '^\[' "$c2" >&2 || true
	exit 1
fi
