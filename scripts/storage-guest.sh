#!/bin/bash
# The guest side of SRP, NFS over RDMA and iSER between two Debian-root
# guests on an ibtca fabric (docs/storage.md; tests/tests/vm_storage.rs).
# n1 is the target and server, n2 the initiator and client; OpenSM runs in
# n1's guest. The share (`ibtca-fabric up --share DIR`, /share in both
# guests) carries this script, the guests' hand-offs (files NAME.rc,
# srp-subscribed, the initiator's port GUID) and nothing else.
#
#   storage-guest.sh setup N        modules, ib0's address, the peer answers
#   storage-guest.sh srp-target     LIO + ib_srpt: a 64 MiB file LUN (n1)
#   storage-guest.sh srp-host       srp_daemon subscribed to traps, ib_srp
#                                   logged in by the Report, fio verify,
#                                   logout (n2)
#   storage-guest.sh nfs-server     nfsd on rdma port 20049 (n1)
#   storage-guest.sh nfs-client     mount -o rdma,port=20049, both ways (n2)
#   storage-guest.sh iser-target    LIO iSCSI + ib_isert: a file LUN (n1)
#   storage-guest.sh iser-host      open-iscsi over ib_iser, fio verify (n2)
#   storage-guest.sh finish P...    n1: wait for n2, check what it wrote
#   storage-guest.sh verdict        fails if any step of this guest failed
#   storage-guest.sh dmesg          the kernel's lines of these protocols
#
# Output lines start with a tag the test reads (STORAGE-..., SRP-...,
# NFS-..., ISER-..., FIO-...). Every wait polls an event (a file, a device,
# a listener) every 0.1 s up to a bound; none is a fixed sleep.
set -o pipefail

A=10.78.0.1 # n1 on ib0
B=10.78.0.2 # n2 on ib0
CFG=/sys/kernel/config/target
PORT=/sys/class/infiniband/ibtca0/ports/1
IQN=iqn.2026-11.io.ibtca:iser
LUN_MIB=64
# The range n2 writes with dd and both sides hash: in the LUN's last MiBs,
# clear of fio's area (the first 32 MiB).
MARK_SKIP=48 MARK_MIB=4

# wait_for COND TENTHS: polls the shell condition COND every 0.1 s.
wait_for() {
	local n=0
	until eval "$1"; do
		n=$((n + 1))
		[ $n -ge "$2" ] && {
			echo "WAIT-TIMEOUT $1"
			return 1
		}
		sleep 0.1
	done
}

tag() { sed "s/^/$1 /"; }

# The port GID's interface ID (the port GUID) as 16 hex digits.
port_guid() { cut -d: -f5- "$PORT/gids/0" | tr -d :; }

# The /dev/sdX whose SCSI host belongs to driver $1 (ib_srp, iscsi_iser).
disk_of() {
	local b h
	for b in /sys/block/sd*; do
		[ -e "$b" ] || continue
		h=$(readlink -f "$b/device" | grep -o 'host[0-9]*' | head -n1)
		[ "$(cat "/sys/class/scsi_host/$h/proc_name" 2>/dev/null)" = "$1" ] &&
			echo "/dev/${b##*/}"
	done
	return 0
}

# sha256 of the marked range of file or device $1 (dd's further
# arguments after it: iflag=direct for a disk, past the initiator's cache).
mark_sum() {
	dd if="$1" bs=1M skip=$MARK_SKIP count=$MARK_MIB "${@:2}" 2>/dev/null |
		sha256sum | cut -d' ' -f1
}

# fio TAG DEV ARGS...: a verified fio job on DEV (its output and status
# tagged FIO-TAG); fails as fio does.
fio_job() {
	local t=$1 dev=$2 st
	shift 2
	fio --name="$t" --filename="$dev" --ioengine=libaio --direct=1 --size=4M \
		--verify=crc32c --verify_fatal=1 --verify_state_save=0 "$@" 2>&1 | tag "FIO-$t"
	st=$?
	echo "FIO-$t-RC $st"
	return $st
}

# The checks both block protocols run on their disk $2 (tag prefix $1):
# fio random and sequential writes read back with crc32c, then a random
# range written with dd whose hash the target compares with its file.
disk_checks() {
	local p=$1 dev=$2 rc=0
	fio_job "$p-rand" "$dev" --rw=randwrite --bs=4k --iodepth=16 || rc=1
	fio_job "$p-seq" "$dev" --rw=write --bs=128k --iodepth=4 --offset=16M || rc=1
	head -c $((MARK_MIB << 20)) /dev/urandom >/tmp/$p.mark
	dd if=/tmp/$p.mark of="$dev" bs=1M seek=$MARK_SKIP oflag=direct 2>&1 | tag "$p-DD" || rc=1
	echo "$p-SUM-WRITTEN $(sha256sum </tmp/$p.mark | cut -d' ' -f1)"
	echo "$p-SUM-READ $(mark_sum "$dev" iflag=direct)"
	return $rc
}

# A LIO file backstore: core/fileio_$1/$2 over a $LUN_MIB MiB file in tmpfs.
backstore() {
	mkdir -p /mnt/lio
	mountpoint -q /mnt/lio || mount -t tmpfs -o size=160m tmpfs /mnt/lio
	truncate -s ${LUN_MIB}M /mnt/lio/$2.img
	mkdir -p $CFG/core/fileio_$1/$2
	echo "fd_dev_name=/mnt/lio/$2.img,fd_dev_size=$((LUN_MIB << 20))" >$CFG/core/fileio_$1/$2/control
	echo 1 >$CFG/core/fileio_$1/$2/enable
}

setup() {
	local me peer
	if [ "$1" = 1 ]; then me=$A peer=$B; else me=$B peer=$A; fi
	wait_for "grep -q ACTIVE $PORT/state" 3000 || exit 1
	echo "STORAGE-PORT n$1 $(cat $PORT/state) lid $(cat $PORT/lid)"
	ibtca-load-modules ipoib cm || exit 1
	ip addr add $me/24 dev ib0 && ip link set ib0 up || exit 1
	# The Debian root has no iputils ping; the chroot's busybox has one.
	wait_for "busybox ping -c1 -W1 $peer >/dev/null" 300 || exit 1
	echo "STORAGE-UP n$1 $me reaches $peer"
	# Renamed into place: the target reads it as soon as it is there.
	[ "$1" = 2 ] && port_guid >/share/n2-guid.new && mv /share/n2-guid.new /share/n2-guid
	return 0
}

srp_target() {
	set -e
	# n2's srp_daemon subscribes to traps first (srp_host): loading
	# ib_srpt sets IsDeviceManagementSupported, the device raises trap
	# 144, and OpenSM forwards it to the subscriber as a Report.
	wait_for '[ -e /share/srp-subscribed ] || [ -e /share/srp-host.rc ]' 6000
	[ -e /share/srp-subscribed ] || {
		echo "STORAGE-PEER-FAILED srp-subscribed"
		exit 1
	}
	modprobe ib_srpt
	modprobe target_core_file
	backstore 0 srp
	local gid wwn acl
	gid=0x$(tr -d : <$PORT/gids/0)
	wwn=$CFG/srpt/$gid
	mkdir -p $wwn/tpgt_1/lun/lun_0
	ln -s $CFG/core/fileio_0/srp $wwn/tpgt_1/lun/lun_0/lun
	# ib_srp's initiator port ID: initiator_ext (0) then its port GUID.
	wait_for '[ -s /share/n2-guid ]' 3000
	acl=0x0000000000000000$(cat /share/n2-guid)
	mkdir -p $wwn/tpgt_1/acls/$acl/lun_0
	ln -s $wwn/tpgt_1/lun/lun_0 $wwn/tpgt_1/acls/$acl/lun_0/lun
	echo 1 >$wwn/tpgt_1/enable
	echo "SRP-TARGET $gid acl $acl capmask $(cat $PORT/cap_mask)"
}

# The srp_daemon of srp_host: a daemon (no -o), so it subscribes to
# traps 64 and 144 with Set(InformInfo) from a UD QP of its own, scans the
# SA once, then acts only on the Reports OpenSM forwards (srptools'
# srp_handle_traps.c). -R 86400 puts its next full scan past any run
# (without -R its main loop never sleeps), -T 0 stops its reconnect
# thread, -e writes each target it finds to ib_srp's add_target, -c also
# prints it, -v and -V log each step; stdbuf makes the log line-buffered.
SRPD_LOG=/tmp/srp_daemon.log

# alive PID: PID runs (not a zombie).
alive() { [ -e "/proc/$1" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }

# iir_has TEXT TRAP: saquery IIR's TEXT holds a record for trap TRAP.
iir_has() { grep -Eq "trap_num\.+$2\$" <<<"$1"; }

# srpd_end PID MARK: ends the daemon (SIGTERM: it unsubscribes, then
# exits) and prints its log, the first MARK lines (written before n1 may
# load ib_srpt) as SRP-DAEMON-BEFORE and the rest as SRP-DAEMON-AFTER; all
# of it as BEFORE without a MARK. Fails when the daemon does not exit.
srpd_end() {
	local st=0
	kill -CONT "$1" 2>/dev/null
	kill -TERM "$1" 2>/dev/null
	wait_for "! alive $1" 3000 || {
		st=1
		kill -KILL "$1"
	}
	wait "$1"
	echo "SRP-DAEMON-EXIT $?"
	if [ -n "$2" ]; then
		head -n "$2" $SRPD_LOG | tag SRP-DAEMON-BEFORE
		tail -n +$(($2 + 1)) $SRPD_LOG | tag SRP-DAEMON-AFTER
	else
		tag SRP-DAEMON-BEFORE <$SRPD_LOG
	fi
	return $st
}

srp_host() {
	local dev found iir pid mark rc=0
	# No udev loads the SCSI disk driver for a new LUN: load it first.
	modprobe sd_mod
	modprobe ib_srp
	modprobe ib_umad
	echo "SRP-SUBSCRIBER $(cat $PORT/gids/0)"
	stdbuf -oL srp_daemon -e -c -v -V -R 86400 -T 0 -i ibtca0 -p 1 >$SRPD_LOG 2>&1 &
	pid=$!
	# Its one scan ends with nothing found (n1 has no target yet), after
	# both subscriptions; the SA lists them as InformInfoRecords.
	if ! wait_for "grep -q 'Query did not find any targets' $SRPD_LOG || ! alive $pid" 3000 ||
		! alive $pid ||
		! wait_for 'iir=$(saquery IIR 2>&1) && iir_has "$iir" 64 && iir_has "$iir" 144' 600; then
		echo "${iir:-no saquery IIR}" | tag SRP-IIR
		srpd_end $pid
		exit 1
	fi
	echo "$iir" | tag SRP-IIR
	# Stopped while n1 loads ib_srpt and sets up its target: the Report of
	# the trap 144 that load raises waits in the daemon's receive queue
	# until the target takes logins. ib_srpt refuses a login before its
	# port is enabled, and srp_daemon would not try that target again.
	kill -STOP $pid
	mark=$(wc -l <$SRPD_LOG)
	echo "$mark" >/share/srp-subscribed.new && mv /share/srp-subscribed.new /share/srp-subscribed
	peer_step srp-target || {
		srpd_end $pid "$mark"
		exit 1
	}
	# The daemon reads the port's IsDeviceManagementSupported from the
	# SA, which has it once OpenSM's sweep on the trap read the port: a
	# one-time scan that only prints (no -e) waits for that and shows what
	# the DM agent answers.
	wait_for 'found=$(srp_daemon -o -c -i ibtca0 -p 1 2>&1); [[ $found == *id_ext=* ]]' 100
	echo "$found" | tag SRP-FOUND
	[[ $found == *id_ext=* ]] || {
		srpd_end $pid "$mark"
		exit 1
	}
	# The daemon goes on with the Report: it asks the SA and the DM agent
	# about the port the trap names, then writes add_target, which returns
	# once ib_srp has logged in (or failed to).
	kill -CONT $pid
	wait_for "grep -q '^Adding target returned' $SRPD_LOG || ! alive $pid" 3000 || rc=1
	srpd_end $pid "$mark" || rc=1
	ls /sys/class/srp_remote_ports | tag SRP-RPORTS
	[ $rc = 0 ] && [ -n "$(ls /sys/class/srp_remote_ports)" ] || exit 1
	wait_for '[ -n "$(disk_of ib_srp)" ]' 600 || exit 1
	dev=$(disk_of ib_srp)
	echo "SRP-DISK $dev $(cat /sys/block/${dev#/dev/}/device/vendor) $(cat /sys/class/srp_remote_ports/*/port_id 2>/dev/null)"
	disk_checks SRP "$dev" || rc=1
	# Logout: deleting the remote port disconnects ib_srp's channel and
	# removes its SCSI host with the disk.
	for p in /sys/class/srp_remote_ports/*; do echo 1 >"$p/delete"; done
	wait_for '[ -z "$(ls /sys/class/srp_remote_ports)" ] && [ -z "$(disk_of ib_srp)" ]' 600 || rc=1
	echo "SRP-LOGOUT rports=$(ls /sys/class/srp_remote_ports | wc -l) disks=$(disk_of ib_srp | wc -l)"
	exit $rc
}

nfs_server() {
	set -e
	modprobe nfsd
	modprobe rpcrdma
	mountpoint -q /proc/fs/nfsd || mount -t nfsd nfsd /proc/fs/nfsd
	mkdir -p /srv/nfs
	mount -t tmpfs -o size=64m tmpfs /srv/nfs
	echo "/srv/nfs $A/24(rw,sync,no_root_squash,no_subtree_check,fsid=0,insecure)" >/etc/exports
	mkdir -p /run/rpcbind /var/lib/nfs
	rpcbind
	exportfs -ra
	rpc.mountd
	# The shortest grace period nfsd takes: a fresh server's first OPENs
	# wait it out.
	echo 10 >/proc/fs/nfsd/nfsv4leasetime
	echo 10 >/proc/fs/nfsd/nfsv4gracetime
	rpc.nfsd 4
	echo rdma 20049 >/proc/fs/nfsd/portlist
	tag NFS-PORTLIST </proc/fs/nfsd/portlist
	head -c 4M /dev/urandom >/srv/nfs/from-n1.bin
	echo "NFS-SUM-N1-WROTE $(sha256sum </srv/nfs/from-n1.bin | cut -d' ' -f1)"
}

nfs_client() {
	local rc=0
	modprobe rpcrdma
	modprobe nfsv4
	peer_step nfs-server || exit 1
	mkdir -p /mnt/nfs
	mount -t nfs4 -o rdma,port=20049 $A:/ /mnt/nfs 2>&1 | tag NFS-MOUNT || exit 1
	grep " /mnt/nfs " /proc/mounts | tag NFS-MOUNTED
	echo "NFS-SUM-N2-READ $(sha256sum </mnt/nfs/from-n1.bin | cut -d' ' -f1)"
	head -c 4M /dev/urandom >/tmp/from-n2.bin
	cp /tmp/from-n2.bin /mnt/nfs/from-n2.bin || rc=1
	echo "NFS-SUM-N2-WROTE $(sha256sum </tmp/from-n2.bin | cut -d' ' -f1)"
	umount /mnt/nfs || rc=1
	exit $rc
}

iser_target() {
	set -e
	modprobe iscsi_target_mod
	modprobe ib_isert
	modprobe target_core_file
	backstore 1 iser
	local t=$CFG/iscsi/$IQN/tpgt_1
	mkdir -p $t/lun/lun_0
	ln -s $CFG/core/fileio_1/iser $t/lun/lun_0/lun
	mkdir $t/np/$A:3260
	echo 1 >$t/np/$A:3260/iser
	echo 0 >$t/attrib/authentication
	echo 1 >$t/attrib/generate_node_acls
	echo 1 >$t/attrib/cache_dynamic_acls
	echo 0 >$t/attrib/demo_mode_write_protect
	echo 1 >$t/enable
	echo "ISER-TARGET $IQN $A:3260 iser $(cat $t/np/$A:3260/iser)"
}

iser_host() {
	local dev rc=0
	modprobe sd_mod
	modprobe ib_iser
	mkdir -p /etc/iscsi /run/lock/iscsi /var/lib/iscsi
	echo "InitiatorName=iqn.2026-11.io.ibtca:n2" >/etc/iscsi/initiatorname.iscsi
	iscsid || exit 1
	peer_step iser-target || exit 1
	# SendTargets discovery over TCP (IPoIB), the login over iSER.
	iscsiadm -m discovery -t st -p $A:3260 2>&1 | tag ISER-DISCOVER || exit 1
	iscsiadm -m node -T $IQN -p $A:3260 -o update -n iface.transport_name -v iser || exit 1
	iscsiadm -m node -T $IQN -p $A:3260 --login 2>&1 | tag ISER-LOGIN || exit 1
	iscsiadm -m session 2>&1 | tag ISER-SESSION
	wait_for '[ -n "$(disk_of iscsi_iser)" ]' 1200 || exit 1
	dev=$(disk_of iscsi_iser)
	echo "ISER-DISK $dev $(cat /sys/block/${dev#/dev/}/device/vendor)"
	disk_checks ISER "$dev" || rc=1
	iscsiadm -m node -T $IQN -p $A:3260 --logout 2>&1 | tag ISER-LOGOUT || rc=1
	exit $rc
}

# n1's last command, `finish PROTO...` (srp, nfs, iser): once n2 is
# through each protocol's step, the target side of its check.
finish() {
	local p rc=0
	for p in "$@"; do
		case $p in
		srp)
			peer_step srp-host 12000 || rc=1
			echo "SRP-SUM-TARGET $(mark_sum /mnt/lio/srp.img)"
			;;
		nfs)
			peer_step nfs-client 12000 || rc=1
			echo "NFS-SUM-N1-READ $(sha256sum </srv/nfs/from-n2.bin | cut -d' ' -f1)"
			;;
		iser)
			peer_step iser-host 12000 || rc=1
			echo "ISER-SUM-TARGET $(mark_sum /mnt/lio/iser.img)"
			;;
		*)
			echo "finish: unknown protocol $p"
			rc=1
			;;
		esac
	done
	return $rc
}

# The kernel's messages of the storage modules (STORAGE-DMESG), for a
# failure's report.
kernel_lines() {
	dmesg | grep -iE 'srp|iser|isert|iscsi|rpcrdma|svcrdma|nfsd|target|ibtca' | tag STORAGE-DMESG
	return 0
}

# step NAME FUNCTION ARGS...: runs one protocol's step in a subshell and records
# its exit status (STORAGE-STEP NAME STATUS SECONDS on the console, /share/NAME.rc
# for the peer), then goes on: a failed protocol does not keep the others
# from running, and the peer stops waiting for it. `verdict` fails the
# guest's run if any step failed.
step() {
	local rc t0=$SECONDS
	("${@:2}")
	rc=$?
	echo "STORAGE-STEP $1 $rc $((SECONDS - t0))s"
	# Written whole, then renamed: the peer polls for the file and reads
	# it at once, and may otherwise read it empty.
	echo $rc >"/share/$1.rc.new" && mv "/share/$1.rc.new" "/share/$1.rc"
	echo "$1 $rc" >>/tmp/storage-steps
	return 0
}

# peer_step NAME: waits until the peer's step NAME has ended; true when it
# passed.
peer_step() {
	wait_for "[ -e /share/$1.rc ]" "${2:-6000}" || return 1
	[ "$(cat "/share/$1.rc")" = 0 ] || {
		echo "STORAGE-PEER-FAILED $1"
		return 1
	}
}

verdict() {
	local bad
	bad=$(awk '$2 != 0' /tmp/storage-steps 2>/dev/null)
	echo "STORAGE-VERDICT ${bad:-pass}" | tr '\n' ' '
	echo
	[ -z "$bad" ]
}

case "$1" in
setup) setup "$2" ;;
srp-target) step srp-target srp_target ;;
srp-host) step srp-host srp_host ;;
nfs-server) step nfs-server nfs_server ;;
nfs-client) step nfs-client nfs_client ;;
iser-target) step iser-target iser_target ;;
iser-host) step iser-host iser_host ;;
finish) step finish finish "${@:2}" ;;
dmesg) kernel_lines ;;
verdict) verdict ;;
*)
	echo "storage-guest.sh: unknown step '$1'" >&2
	exit 2
	;;
esac
