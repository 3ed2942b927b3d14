# shellcheck shell=bash
# The guest side of the upper-layer protocols between two guests, for
# scripts/demo-storage.sh, scripts/ulp-bench.sh and tests/tests/vm_ulp.rs
# (sourced; the test builds its guests' commands from these functions): a
# two-node topology with OpenSM in n1's guest, and the `ibtca-fabric up
# --run` commands that bring a transport up, start an nvmet-rdma target in
# n1 (namespace 1: null_blk, memory-backed, 64 MiB; namespace 2: a 64 MiB
# file in tmpfs) and connect n2 to it. docs/ulp.md describes the pieces.
#
#   ulp_transport rxe|ibtca   sets ULP_DEV, ULP_ADDR (n1, n2), ULP_LABEL and
#                             ULP_PORTID (the target's nvmet port)
#   ulp_missing GUEST_DIR     what the ibtca transport lacks in that image
#   ulp_topology FILE         writes the topology
#   ulp_setup N [T...]        n's command: modules, the RDMA devices of the
#                             transports T (default: the current one), IPs
#   ulp_target [T...]         n1's command: the target with one port per
#                             transport, up until the share has host-done-T
#                             for each; drops and restores a port on request
#                             (ulp_outage)
#   ulp_host BODY             n2's command: connect, run BODY (shell; the
#                             namespaces' devices in $ns1 and $ns2; a failure
#                             sets rc), disconnect; exit $rc
#   ulp_outage FIOCMD         shell for BODY: FIOCMD in the background, the
#                             target's port dropped mid-I/O and restored
#   ulp_doomed                n1's last command: up until its QEMU is killed
#                             (by the test, on /share/target-kill)
#   ulp_killed FIOCMD         n2's last command: connects (ctrl_loss_tmo
#                             2 s), FIOCMD in the background, asks for the
#                             target guest's death mid-I/O, reports how the
#                             I/O and the controller end and that it lives
#   ulp_server NAME PORT CMD  n1's command: an rdma_cm server, announced
#   ulp_receiver NAME CMD     n1's command: a multicast receiver, announced
#   ulp_client NAME CMD       n2's command: its client
#   ulp_sender NAME CMD TRIES n2's command: CMD again until NAME's server is
#                             done, at most TRIES times (a multicast sender)
#   ulp_write_commands DIR    the arrays n1 and n2 of guest commands as
#                             DIR/n1.1, DIR/n1.2, ..., DIR/n2.1, ... (the
#                             scripts' --commands)
#   ulp_up FABRIC RUN GUEST SHARE N1CMD... -- N2CMD...
#                             boots both guests and waits for them; with
#                             ULP_GUEST_PACKAGES (a,b,...) set, from the
#                             Debian root with those packages layered on
#                             (docs/guest-root.md) instead of the initramfs
# Guests wait on events (a listener in `rdma resource show cm_id`, files in
# the share, block devices appearing), polled every 0.1 s up to a bound.

ULP_NQN=nqn.2026-11.io.ibtca:ulp

# Shell functions every guest command starts with (after ulp_transport):
#   wait_for COND TENTHS   polls COND every 0.1 s, at most TENTHS times
#   listening ADDR:PORT    an rdma_cm listener is bound there
#   ns_dev NSID            the block device of the target's namespace NSID
#                          (not a multipath path's hidden nvmeXcYnZ)
#   nvmf_up [TMO]          discover and connect the target (ctrl_loss_tmo
#                          TMO s, default 600), wait for both namespaces:
#                          $ns1, $ns2 (ULP-DISCOVER, ULP-CONNECT, ULP-NS
#                          lines)
#   nvmf_down              disconnect, wait for the namespaces to go
#   ctrl_state             the state of the controller of the subsystem
#   writes_done NSID       writes completed on the namespace's block
#                          devices (a multipath head counts none: its
#                          I/O statistics are off by default; its paths')
ulp_funcs() {
	local a=${ULP_ADDR[0]}
	cat <<EOF
set -o pipefail
wait_for() { n=0; until eval "\$1"; do n=\$((n + 1)); [ \$n -ge \$2 ] && { echo "WAIT-TIMEOUT \$1"; return 1; }; sleep 0.1; done; }
listening() { rdma resource show cm_id 2>/dev/null | grep -q "state LISTEN .*src-addr \$1 "; }
ns_dev() { for b in /sys/block/nvme*n*; do case \${b##*/} in *c*) continue ;; esac; [ "\$(cat \$b/nsid 2>/dev/null)" = \$1 ] && echo /dev/\${b##*/}; done; return 0; }
nvmf_up() {
	nvme discover -t rdma -a $a -s 4420 2>&1 | sed 's/^/ULP-DISCOVER /' &&
	nvme connect -t rdma -a $a -s 4420 -n $ULP_NQN --reconnect-delay=1 --ctrl-loss-tmo=\${1:-600} 2>&1 |
		sed 's/^/ULP-CONNECT /' &&
	wait_for '[ -n "\$(ns_dev 1)" ] && [ -n "\$(ns_dev 2)" ]' 1200 &&
	ns1=\$(ns_dev 1) && ns2=\$(ns_dev 2) && echo "ULP-NS \$ns1 \$ns2"
}
nvmf_down() {
	nvme disconnect -n $ULP_NQN 2>&1 | sed 's/^/ULP-DISCONNECT /' &&
	wait_for '[ -z "\$(ns_dev 1)\$(ns_dev 2)" ]' 600
}
ctrl_state() { for c in /sys/class/nvme/nvme*; do [ "\$(cat \$c/subsysnqn 2>/dev/null)" = $ULP_NQN ] && cat \$c/state; done; return 0; }
writes_done() { s=0; for b in /sys/block/nvme*n*; do [ "\$(cat \$b/nsid 2>/dev/null)" = \$1 ] && s=\$((s + \$(awk '{ print \$5 }' \$b/stat))); done; echo \$s; }
EOF
}

ulp_transport() {
	case "$1" in
	rxe)
		ULP_DEV=rxe0
		ULP_ADDR=(10.77.0.1 10.77.0.2)
		ULP_LABEL="soft-RoCE (rxe0 on the management NIC eth0)"
		ULP_PORTID=1
		;;
	ibtca)
		ULP_DEV=ibtca0
		ULP_ADDR=(10.78.0.1 10.78.0.2)
		ULP_LABEL="ibtca (ibtca0, IPoIB on ib0)"
		ULP_PORTID=2
		;;
	*)
		echo "transport rxe or ibtca, not '$1'" >&2
		return 2
		;;
	esac
	ULP_TRANSPORT=$1
}

# shellcheck disable=SC2154 # n1 and n2 are the calling script's arrays
ulp_write_commands() {
	mkdir -p "$1"
	for i in "${!n1[@]}"; do printf '%s\n' "${n1[$i]}" >"$1/n1.$((i + 1))"; done
	for i in "${!n2[@]}"; do printf '%s\n' "${n2[$i]}" >"$1/n2.$((i + 1))"; done
}

# What the ibtca transport needs that the guest image GUEST_DIR lacks, on
# stdout (nothing when it has it all).
ulp_missing() {
	[ "$ULP_TRANSPORT" = ibtca ] || return 0
	# The newc archive names its files in clear. grep reads it all (no -q),
	# so that gzip is not cut off by SIGPIPE, a failure under pipefail.
	if ! gzip -dc "$1/initramfs.cpio.gz" | grep -aF 'lib/modules/ipoib.modules' >/dev/null; then
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
	local n=$1 cur=$ULP_TRANSPORT t me peer modules=""
	local port=/sys/class/infiniband/ibtca0/ports/1
	shift
	[ $# -gt 0 ] || set -- "$cur"
	ulp_funcs
	echo "wait_for 'grep -q ACTIVE $port/state' 3000 &&" \
		"echo \"ULP-PORT n$n ibtca0 \$(cat $port/state) lid \$(cat $port/lid)\" || exit 1"
	for t in "$@"; do
		case $t in
		rxe) modules="$modules rxe" ;;
		ibtca) modules="$modules ipoib" ;;
		esac
	done
	echo "ibtca-load-modules$modules cm nvme-host nvmet || {" \
		"echo 'ULP-MISSING the guest image cannot load the module groups$modules'; exit 1; }"
	for t in "$@"; do
		ulp_transport "$t"
		me=${ULP_ADDR[$((n - 1))]} peer=${ULP_ADDR[$((2 - n))]}
		case $t in
		rxe) echo "rdma link add rxe0 type rxe netdev eth0 || exit 1" ;;
		ibtca) echo "ip addr add $me/24 dev ib0 && ip link set ib0 up || exit 1" ;;
		esac
		echo "echo \"ULP-LINK n$n \$(rdma link show $ULP_DEV/1)\""
		echo "echo \"ULP-ADDR n$n $me\""
		# IPoIB's ARP rides the broadcast group: no answer means the
		# multicast path (attach, the switches' tables) is missing.
		echo "wait_for 'ping -c1 -W1 $peer >/dev/null' 300 || {" \
			"echo \"ULP-MISSING $peer unreachable from $me:\" \$(dmesg | grep -m1 -i multicast); exit 1; }"
	done
	ulp_transport "$cur"
}

ulp_target() {
	local cur=$ULP_TRANSPORT t cfg=/sys/kernel/config
	local sub=$cfg/nvmet/subsystems/$ULP_NQN
	[ $# -gt 0 ] || set -- "$cur"
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
EOF
	local done_all="true"
	for t in "$@"; do
		ulp_transport "$t"
		local a=${ULP_ADDR[0]} p=$cfg/nvmet/ports/$ULP_PORTID
		cat <<EOF
mkdir $p
echo rdma >$p/addr_trtype
echo ipv4 >$p/addr_adrfam
echo $a >$p/addr_traddr
echo 4420 >$p/addr_trsvcid
ln -s $sub $p/subsystems/$ULP_NQN
wait_for 'listening $a:4420' 600
echo "ULP-TARGET $ULP_NQN rdma $a:4420 ns1 null_blk 64MiB ns2 file-in-tmpfs 64MiB"
EOF
		done_all="$done_all && [ -e /share/host-done-$t ]"
	done
	ulp_transport "$cur"
	# A host asks for an outage by writing the port's ID into
	# /share/target-drop; the port goes (nvmet deletes the controllers
	# connected through it and stops listening) until /share/target-return.
	cat <<EOF
touch /share/nvmet-ready
while ! { $done_all; }; do
	if [ -e /share/target-drop ] && [ ! -e /share/target-dropped ]; then
		p=$cfg/nvmet/ports/\$(cat /share/target-drop)
		rm \$p/subsystems/$ULP_NQN
		echo "ULP-TARGET-DROPPED port \$(cat \$p/addr_traddr):4420"
		touch /share/target-dropped
		wait_for '[ -e /share/target-return ]' 12000
		ln -s $sub \$p/subsystems/$ULP_NQN
		wait_for "listening \$(cat \$p/addr_traddr):4420" 600
		echo "ULP-TARGET-BACK port \$(cat \$p/addr_traddr):4420"
	fi
	sleep 0.1
done
echo "ULP-NS2-NONZERO \$(head -c 1048576 /mnt/ulp/ns2.img | tr -d '\\0' | wc -c)"
EOF
}

ulp_host() {
	ulp_funcs
	cat <<EOF
trap 'touch /share/host-done-$ULP_TRANSPORT' EXIT
echo "ULP-HOST $ULP_TRANSPORT"
mkdir -p /etc/nvme
[ -e /etc/nvme/hostnqn ] ||
	echo nqn.2014-08.org.nvmexpress:uuid:\$(cat /proc/sys/kernel/random/uuid) >/etc/nvme/hostnqn
wait_for '[ -e /share/nvmet-ready ]' 12000 || exit 1
nvmf_up || exit 1
rc=0
$1
nvmf_down
exit \$rc
EOF
}

# Shell for ulp_host's BODY: FIOCMD (on $ns1) runs in the background; once
# it has completed writes, the target drops this transport's port. The host
# reports what it saw (ULP-OUTAGE lines): the controller leaving "live"
# while fio runs, a failed reconnect attempt against the dropped port; then
# the port returns, fio finishes (its status: FIOCMD's own lines) and the
# host's kernel log is searched for oopses, warnings and hung tasks. The
# port's ID is written under another name and renamed: the target polls
# for /share/target-drop and reads it at once, so it must never see it empty.
ulp_outage() {
	cat <<EOF
w0=\$(writes_done 1)
( $1 ) &
fio_pid=\$!
wait_for '[ "\$(writes_done 1)" -gt \$w0 ]' 6000 || rc=1
echo $ULP_PORTID >/share/target-drop.new && mv /share/target-drop.new /share/target-drop
wait_for '[ -e /share/target-dropped ]' 600 || rc=1
wait_for '[ "\$(ctrl_state)" != live ]' 600 || rc=1
echo "ULP-OUTAGE controller \$(ctrl_state) fio \$(kill -0 \$fio_pid 2>/dev/null && echo running || echo finished)"
wait_for 'dmesg | grep -q "Failed reconnect attempt"' 1200 || rc=1
echo "ULP-OUTAGE reconnect \$(dmesg | grep -m1 'Failed reconnect attempt' | sed 's/^\[[^]]*\] //')"
touch /share/target-return
wait \$fio_pid
wait_for '[ "\$(ctrl_state)" = live ]' 1200 || rc=1
echo "ULP-OUTAGE back \$(ctrl_state) \$(dmesg | grep -m1 'Successfully reconnected' | sed 's/^\[[^]]*\] //')"
echo "ULP-OUTAGE kernel-trouble \$(dmesg | grep -c -E 'BUG:|Oops|WARNING:|blocked for more than|Call Trace')"
EOF
}

# n1 after its target: up until the test kills its QEMU, which n2's
# ulp_killed asks for with /share/target-kill; the test then makes
# /share/target-killed, which n1 must not live to see (nor n2's end,
# /share/killed-host-done: n2 failed before it asked).
ulp_doomed() {
	ulp_funcs
	cat <<EOF
echo "ULP-DOOMED"
wait_for '[ -e /share/target-killed ] || [ -e /share/killed-host-done ]' 12000
echo "ULP-DOOMED survived"
exit 1
EOF
}

# n2's command once the target is no longer needed otherwise: connect
# with ctrl_loss_tmo 2 s, FIOCMD (on $ns1, writing until it fails) in the
# background; once it has completed writes, /share/target-kill asks the
# test to kill n1's QEMU, which it has done at /share/target-killed. Then
# (ULP-KILLED lines): fio still running at the kill, the controller
# leaving "live", fio's end (its status: FIOCMD's own lines), the
# reconnect attempts and the controller's removal in the kernel log since
# the connection, the controller gone, ibtca0's port as ibv_devinfo
# queries it afterwards, and the kernel's oopses, warnings and hung tasks.
ulp_killed() {
	ulp_funcs
	cat <<EOF
trap 'touch /share/killed-host-done' EXIT
echo "ULP-KILLED $ULP_TRANSPORT"
nvmf_up 2 || exit 1
rc=0
d0=\$(dmesg | wc -l)
w0=\$(writes_done 1)
( $1 ) &
fio_pid=\$!
wait_for '[ "\$(writes_done 1)" -gt \$w0 ]' 6000 || rc=1
touch /share/target-kill
wait_for '[ -e /share/target-killed ]' 6000 || rc=1
echo "ULP-KILLED target dead, fio \$(kill -0 \$fio_pid 2>/dev/null && echo running || echo finished)"
wait_for '[ "\$(ctrl_state)" != live ]' 1200 || rc=1
echo "ULP-KILLED controller \$(ctrl_state)"
wait_for '! kill -0 \$fio_pid 2>/dev/null' 3000 || rc=1
wait \$fio_pid
wait_for '[ -z "\$(ctrl_state)" ]' 3000 || rc=1
echo "ULP-KILLED controller gone"
dmesg | tail -n +\$((d0 + 1)) | grep -e 'reconnect' -e 'Reconnecting' -e 'Removing' |
	sed 's/^\[[^]]*\] /ULP-KILLED kernel: /'
echo "ULP-KILLED after port \$(ibv_devinfo -d ibtca0 | awk '/state:/ { print \$2, \$3; exit }')"
echo "ULP-KILLED kernel-trouble \$(dmesg | grep -c -E 'BUG:|Oops|WARNING:|blocked for more than|Call Trace')"
exit \$rc
EOF
}

# A server for a client in the other guest: CMD in the background until it
# exits, /share/NAME-listen made once READY (a shell condition) holds,
# /share/NAME-done once CMD exited; its output tagged "NAME-SERVER ", its
# status the command's.
ulp_server_when() {
	ulp_funcs
	cat <<EOF
$3 >/tmp/$1.log 2>&1 &
pid=\$!
wait_for '$2' 600 && touch /share/$1-listen
wait \$pid
rc=\$?
touch /share/$1-done
sed 's/^/$1-SERVER /' /tmp/$1.log
exit \$rc
EOF
}

# An rdma_cm server: ready once it listens on PORT at n1's address.
ulp_server() {
	ulp_server_when "$1" "listening ${ULP_ADDR[0]}:$2" "$3"
}

# A multicast receiver: it has no listener to show, so its sender
# (ulp_sender) starts at once and sends again until the receiver is done.
ulp_receiver() {
	ulp_server_when "$1" ":" "$2"
}

# The client of `ulp_server NAME`: CMD once the server listens, its output
# tagged "NAME-CLIENT ".
ulp_client() {
	ulp_funcs
	echo "wait_for '[ -e /share/$1-listen ]' 12000 || exit 1"
	echo "$2 2>&1 | sed 's/^/$1-CLIENT /'"
}

# The sender for `ulp_receiver NAME`: CMD, again while the receiver is not
# done, at most TRIES times; each run's output tagged "NAME-CLIENT ", the
# status that of the last run.
ulp_sender() {
	ulp_funcs
	cat <<EOF
wait_for '[ -e /share/$1-listen ]' 12000 || exit 1
n=0
while :; do
	n=\$((n + 1))
	$2 2>&1 | sed 's/^/$1-CLIENT /'
	s=\$?
	wait_for '[ -e /share/$1-done ]' 10 && exit \$s
	[ \$n -lt $3 ] || { echo "$1-CLIENT gave up after \$n runs"; exit 1; }
done
EOF
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
		--run-vm "$(dirname "${BASH_SOURCE[0]}")/run-vm.sh" --share "$share" \
		${ULP_GUEST_PACKAGES:+--guest-packages "$ULP_GUEST_PACKAGES"} "${args[@]}"
}
