# shellcheck shell=bash
# The guest side of the upper-layer protocols between two guests, for
# scripts/demo-storage.sh, scripts/ulp-bench.sh and tests/tests/vm_ulp.rs
# (sourced; the test builds its guests' commands from these functions): a
# two-node topology with OpenSM in n1's guest, and the `ibtca-fabric up
# --run` commands that bring a transport up, start an nvmet-rdma target in
# n1 (namespace 1: null_blk, memory-backed, 64 MiB; namespace 2: a 64 MiB
# file in tmpfs) and connect n2 to it. docs/ulp.md describes the pieces.
#
#   ulp_transport rxe|ibtca   sets ULP_DEV, ULP_ADDR (n1, n2) and ULP_LABEL
#   ulp_missing GUEST_DIR     what the ibtca transport lacks in that image
#   ulp_topology FILE         writes the topology
#   ulp_setup N               n's command: modules, the RDMA device, its IP
#   ulp_target                n1's command: the target, up until the share
#                             has host-done
#   ulp_host BODY             n2's command: connect, run BODY (shell; the
#                             namespaces' devices in $ns1 and $ns2; a failure
#                             sets rc), disconnect; exit $rc
#   ulp_server NAME PORT CMD  n1's command: an rdma_cm server, announced
#   ulp_client NAME CMD       n2's command: its client
#   ulp_up FABRIC RUN GUEST SHARE N1CMD... -- N2CMD...
#                             boots both guests and waits for them
# Guests wait on events (a listener in `rdma resource show cm_id`, files in
# the share, block devices appearing), polled every 0.1 s up to a bound.

ULP_NQN=nqn.2026-11.io.ibtca:ulp

# Shell functions every guest command starts with (after ulp_transport):
#   wait_for COND TENTHS   polls COND every 0.1 s, at most TENTHS times
#   listening ADDR:PORT    an rdma_cm listener is bound there
#   ns_dev NSID            the block device of the target's namespace NSID
#                          (not a multipath path's hidden nvmeXcYnZ)
#   nvmf_up                discover and connect the target, wait for both
#                          namespaces: $ns1, $ns2 (ULP-DISCOVER, ULP-CONNECT,
#                          ULP-NS lines)
#   nvmf_down              disconnect, wait for the namespaces to go
ulp_funcs() {
	local a=${ULP_ADDR[0]}
	cat <<EOF
set -o pipefail
wait_for() { n=0; until eval "\$1"; do n=\$((n + 1)); [ \$n -ge \$2 ] && { echo "WAIT-TIMEOUT \$1"; return 1; }; sleep 0.1; done; }
listening() { rdma resource show cm_id 2>/dev/null | grep -q "state LISTEN .*src-addr \$1 "; }
ns_dev() { for b in /sys/block/nvme*n*; do case \${b##*/} in *c*) continue ;; esac; [ "\$(cat \$b/nsid 2>/dev/null)" = \$1 ] && echo /dev/\${b##*/}; done; return 0; }
nvmf_up() {
	nvme discover -t rdma -a $a -s 4420 2>&1 | sed 's/^/ULP-DISCOVER /' &&
	nvme connect -t rdma -a $a -s 4420 -n $ULP_NQN 2>&1 | sed 's/^/ULP-CONNECT /' &&
	wait_for '[ -n "\$(ns_dev 1)" ] && [ -n "\$(ns_dev 2)" ]' 1200 &&
	ns1=\$(ns_dev 1) && ns2=\$(ns_dev 2) && echo "ULP-NS \$ns1 \$ns2"
}
nvmf_down() {
	nvme disconnect -n $ULP_NQN 2>&1 | sed 's/^/ULP-DISCONNECT /' &&
	wait_for '[ -z "\$(ns_dev 1)\$(ns_dev 2)" ]' 600
}
EOF
}

ulp_transport() {
	case "$1" in
	rxe)
		ULP_DEV=rxe0
		ULP_ADDR=(10.77.0.1 10.77.0.2)
		ULP_LABEL="soft-RoCE (rxe0 on the management NIC eth0)"
		;;
	ibtca)
		ULP_DEV=ibtca0
		ULP_ADDR=(10.78.0.1 10.78.0.2)
		ULP_LABEL="ibtca (ibtca0, IPoIB on ib0)"
		;;
	*)
		echo "transport rxe or ibtca, not '$1'" >&2
		return 2
		;;
	esac
	ULP_TRANSPORT=$1
}

# What the ibtca transport needs that the guest image GUEST_DIR lacks, on
# stdout (nothing when it has it all).
ulp_missing() {
	[ "$ULP_TRANSPORT" = ibtca ] || return 0
	# The newc archive names its files in clear.
	if ! gzip -dc "$1/initramfs.cpio.gz" | grep -qaF 'lib/modules/ipoib.modules'; then
		echo "the guest image $1 has no module group 'ipoib' (ib_ipoib), without" \
			"which rdma_cm cannot resolve IP addresses on ibtca: rebuild it with" \
			"scripts/build-guest.sh, or use --transport rxe for soft-RoCE."
	fi
}

ulp_topology() {
	cat >"$1" <<'EOF'
{
  "sm": "n1",
  "nodes": [ { "name": "n1", "lid": 1 }, { "name": "n2", "lid": 2 } ],
  "switches": [ { "name": "sw0", "ports": 2 } ],
  "links": [ { "a": "n1", "b": "sw0:1" }, { "a": "n2", "b": "sw0:2" } ],
  "guest": { "mem": "768M" }
}
EOF
}

ulp_setup() {
	local n=$1 me=${ULP_ADDR[$(($1 - 1))]} peer=${ULP_ADDR[$((2 - $1))]}
	local port=/sys/class/infiniband/ibtca0/ports/1
	ulp_funcs
	echo "wait_for 'grep -q ACTIVE $port/state' 3000 &&" \
		"echo \"ULP-PORT n$n ibtca0 \$(cat $port/state) lid \$(cat $port/lid)\" || exit 1"
	case "$ULP_TRANSPORT" in
	rxe)
		echo "ibtca-load-modules rxe cm nvme-host nvmet || exit 1"
		echo "rdma link add rxe0 type rxe netdev eth0 || exit 1"
		;;
	ibtca)
		echo "ibtca-load-modules ipoib cm nvme-host nvmet || {" \
			"echo 'ULP-MISSING the guest image cannot load the ipoib module group'; exit 1; }"
		echo "ip addr add $me/24 dev ib0 && ip link set ib0 up || exit 1"
		;;
	esac
	echo "echo \"ULP-LINK n$n \$(rdma link show $ULP_DEV/1)\""
	echo "echo \"ULP-ADDR n$n $me\""
	# IPoIB's ARP rides the broadcast group: no answer means the multicast
	# path (attach, the switches' tables) is missing.
	echo "wait_for 'ping -c1 -W1 $peer >/dev/null' 300 || {" \
		"echo \"ULP-MISSING $peer unreachable from $me:\" \$(dmesg | grep -m1 -i multicast); exit 1; }"
}

ulp_target() {
	local a=${ULP_ADDR[0]} cfg=/sys/kernel/config
	local sub=$cfg/nvmet/subsystems/$ULP_NQN p=$cfg/nvmet/ports/1
	ulp_funcs
	cat <<EOF
set -e
mkdir $cfg/nullb/nullb1
echo 64 >$cfg/nullb/nullb1/size
echo 1 >$cfg/nullb/nullb1/memory_backed
echo 1 >$cfg/nullb/nullb1/power
mkdir -p /mnt/ulp
mount -t tmpfs tmpfs /mnt/ulp
dd if=/dev/zero of=/mnt/ulp/ns2.img bs=1M count=64 2>/dev/null
mkdir $sub
echo 1 >$sub/attr_allow_any_host
mkdir $sub/namespaces/1
echo -n /dev/nullb1 >$sub/namespaces/1/device_path
echo 1 >$sub/namespaces/1/enable
mkdir $sub/namespaces/2
echo -n /mnt/ulp/ns2.img >$sub/namespaces/2/device_path
echo 1 >$sub/namespaces/2/buffered_io
echo 1 >$sub/namespaces/2/enable
mkdir $p
echo rdma >$p/addr_trtype
echo ipv4 >$p/addr_adrfam
echo $a >$p/addr_traddr
echo 4420 >$p/addr_trsvcid
ln -s $sub $p/subsystems/$ULP_NQN
wait_for 'listening $a:4420' 600
echo "ULP-TARGET $ULP_NQN rdma $a:4420 ns1 null_blk 64MiB ns2 file-in-tmpfs 64MiB"
touch /share/nvmet-ready
wait_for '[ -e /share/host-done ]' 12000
echo "ULP-NS2-NONZERO \$(head -c 1048576 /mnt/ulp/ns2.img | tr -d '\\0' | wc -c)"
EOF
}

ulp_host() {
	ulp_funcs
	cat <<EOF
trap 'touch /share/host-done' EXIT
mkdir -p /etc/nvme
echo nqn.2014-08.org.nvmexpress:uuid:\$(cat /proc/sys/kernel/random/uuid) >/etc/nvme/hostnqn
wait_for '[ -e /share/nvmet-ready ]' 12000 || exit 1
nvmf_up || exit 1
rc=0
$1
nvmf_down
exit \$rc
EOF
}

# A server for a client in the other guest: CMD in the background until it
# exits, /share/NAME-listen made once it listens on PORT at n1's address;
# its output tagged "NAME-SERVER ", its status the command's.
ulp_server() {
	ulp_funcs
	cat <<EOF
$3 >/tmp/$1.log 2>&1 &
pid=\$!
wait_for 'listening ${ULP_ADDR[0]}:$2' 600 && touch /share/$1-listen
wait \$pid
rc=\$?
sed 's/^/$1-SERVER /' /tmp/$1.log
exit \$rc
EOF
}

# The client of `ulp_server NAME`: CMD once the server listens, its output
# tagged "NAME-CLIENT ".
ulp_client() {
	ulp_funcs
	echo "wait_for '[ -e /share/$1-listen ]' 12000 || exit 1"
	echo "$2 2>&1 | sed 's/^/$1-CLIENT /'"
}

ulp_up() {
	local fabric=$1 run=$2 guest=$3 share=$4 node=n1 args=()
	shift 4
	for c in "$@"; do
		if [ "$c" = -- ]; then
			node=n2
			continue
		fi
		args+=(--run "$node=$c")
	done
	local topo=$run.json
	ulp_topology "$topo"
	"$fabric" up "$topo" --run-dir "$run" --guests --wait --guest-timeout 1500 \
		--kernel "$guest/vmlinuz" --initrd "$guest/initramfs.cpio.gz" \
		--run-vm "$(dirname "${BASH_SOURCE[0]}")/run-vm.sh" --share "$share" "${args[@]}"
}
