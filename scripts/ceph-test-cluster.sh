#!/usr/bin/env bash
# A throwaway one-host Ceph 16.2 (pacific) cluster for tests, from Debian's packages (ceph-mon,
# ceph-osd, ceph-mgr, ceph-mds, ceph-fuse, ceph-common; scripts/install-deps.sh --with-test-tools).
# Contract (tests rely on it):
#
#   ceph-test-cluster.sh start DIR
#     Makes a cluster of its own under DIR: its own fsid, DIR/ceph.conf, DIR/keyring (client.admin),
#     1 mon (mon.a, data DIR/mon), 1 mgr (mgr.x), 3 bluestore OSDs on sparse files
#     (DIR/osd/N/block), 1 MDS (mds.a) and the CephFS file system `vols` (pools cephfs.vols.meta and
#     cephfs.vols.data, size 3, min_size 2; `osd crush chooseleaf type = 0` lets the 3 replicas sit
#     on one host). Its mon listens on 127.0.0.1 on a free port and every daemon binds in a port
#     range of its own, so it never touches a system cluster (and never reads /etc/ceph). Returns
#     once the PGs are active+clean and an MDS is active. Prints shell-evaluable lines on stdout:
#         CEPH_CONF=DIR/ceph.conf
#         CEPH_KEYRING=DIR/keyring
#         CEPH_NAME=client.admin
#         CEPH_FS=vols
#         CEPH_MON=v2:127.0.0.1:PORT
#     The time it took is logged on stderr. Exit status 3 with one line
#     "ceph-test-cluster: a cluster cannot start: WHY" on stderr when none can run here (not root,
#     packages missing, a daemon dies at once): callers skip on that one. Any other failure exits 1.
#
#   ceph-test-cluster.sh stop-mon DIR    -> SIGKILL the mon (an outage: clients time out)
#   ceph-test-cluster.sh start-mon DIR   -> start it again on its data and port; returns once it
#                                           answers
#   ceph-test-cluster.sh stop-osd DIR N  -> SIGKILL osd.N (a lost storage host: I/O goes on
#                                           degraded, min_size 2); returns once the mon marks it down
#   ceph-test-cluster.sh start-osd DIR N -> start osd.N again on its data; returns once its PGs are
#                                           active+clean again (recovered)
#   ceph-test-cluster.sh stop DIR        -> unmount the ceph-fuse mounts under DIR, stop every
#                                           daemon of the cluster and remove DIR
set -euo pipefail
cmd=${1:?start|stop|stop-mon|start-mon}
dir=${2:?directory}

fs_name=vols
osd_count=3
# Sparse: only what is written takes disk. CEPH_TEST_OSD_GB for more (the benches write GBs).
osd_block_bytes=$((${CEPH_TEST_OSD_GB:-3} * 1024 * 1024 * 1024))

cannot_start() {
  echo "ceph-test-cluster: a cluster cannot start: $*" >&2
  exit 3
}
fail() {
  echo "ceph-test-cluster: $*" >&2
  exit 1
}
now_ms() { date +%s%3N; }

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
conf=$dir/ceph.conf
keyring=$dir/keyring
c() { timeout 60 ceph --conf "$conf" --name client.admin --keyring "$keyring" "$@"; }

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Waits up to $1 seconds until "$2..." succeeds.
wait_for() {
  local seconds=$1; shift
  for _ in $(seq 1 $((seconds * 5))); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  return 1
}

# A daemon's pid from its pid file, if it still runs.
daemon_pid() {
  local file=$dir/run/$1.pid
  [ -f "$file" ] || return 1
  local pid; pid=$(cat "$file")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

start_mon() {
  ceph-mon --conf "$conf" -i a >>"$dir/log/daemons.out" 2>&1 \
    || cannot_start "ceph-mon exited $? (see $dir/log/mon.a.log)"
  wait_for 30 c --connect-timeout 5 mon stat \
    || fail "the mon does not answer: $(tail -5 "$dir/log/mon.a.log" 2>/dev/null)"
}

pgs_clean() {
  # Every PG active+clean and at least one: "pgmap" of `ceph status`.
  local s; s=$(c --connect-timeout 5 pg stat --format json) || return 1
  python3 -c '
import json, sys
d = json.loads(sys.argv[1])
m = d.get("pg_summary", d)
total = m.get("num_pgs", 0)
clean = sum(x["num"] for x in m.get("num_pg_by_state", []) if x["name"] == "active+clean")
sys.exit(0 if total > 0 and clean == total else 1)' "$s"
}

osds_up() {
  c --connect-timeout 5 osd stat --format json \
    | python3 -c 'import json, sys
sys.exit(0 if json.load(sys.stdin)["num_up_osds"] == int(sys.argv[1]) else 1)' "$osd_count"
}

mds_active() {
  c --connect-timeout 5 fs status "$fs_name" --format json 2>/dev/null \
    | python3 -c 'import json, sys
d = json.load(sys.stdin)
sys.exit(0 if any(m.get("state") == "active" for m in d.get("mdsmap", [])) else 1)'
}

start() {
  local started; started=$(now_ms)
  [ "$(id -u)" -eq 0 ] || cannot_start "not root (the daemons and ceph-fuse need it)"
  local missing=()
  for tool in ceph ceph-mon ceph-osd ceph-mgr ceph-mds ceph-fuse ceph-authtool monmaptool \
              python3 uuidgen; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
  done
  [ ${#missing[@]} -eq 0 ] || cannot_start "missing ${missing[*]} (apt-get install" \
    "ceph-mon ceph-osd ceph-mgr ceph-mds ceph-fuse ceph-common," \
    "or scripts/install-deps.sh --with-test-tools)"
  [ -e /dev/fuse ] || cannot_start "no /dev/fuse (ceph-fuse cannot mount)"
  [ ! -e "$conf" ] || fail "$dir already holds a cluster (stop it first)"

  local fsid mon_port port_min
  fsid=$(uuidgen)
  mon_port=$(free_port)
  # The other daemons bind in a range of 100 ports of their own (the mon's port + 1 ...), not in
  # Ceph's default 6800-7300 where a system cluster's daemons live. Two clusters started at once
  # could overlap: a daemon then takes the next free port of its range.
  port_min=$(( (mon_port % 20000) + 30000 ))
  mkdir -p "$dir"/{run,log,mon,mgr/x,mds/a,osd,mnt}
  cat >"$conf" <<EOF
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$mon_port
mon initial members = a
public network = 127.0.0.0/8
ms bind msgr1 = false
ms bind port min = $port_min
ms bind port max = $((port_min + 99))
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
run dir = $dir/run
admin socket = $dir/run/\$name.asok
pid file = $dir/run/\$name.pid
log file = $dir/log/\$name.log
log to stderr = false
err to stderr = true
keyring = $dir/keyring
# One host: the replicas of a PG go on distinct OSDs, not distinct hosts.
osd crush chooseleaf type = 0
osd pool default size = 3
osd pool default min size = 2
osd pool default pg autoscale mode = off
mon allow pool delete = true
mon warn on pool no redundancy = false
# A test cluster on a shared disk: no MON_DISK_LOW warning for a disk 70 % full.
mon data avail warn = 5
mon data avail crit = 2
mon osd full ratio = 0.97
mon osd nearfull ratio = 0.95
mon osd backfillfull ratio = 0.96
auth allow insecure global id reclaim = false
mgr initial modules = volumes
[mon]
mon data = $dir/mon
keyring = $dir/mon.keyring
mon cluster log file = $dir/log/cluster.log
[mgr]
mgr data = $dir/mgr/\$id
keyring = $dir/mgr/\$id/keyring
[osd]
osd data = $dir/osd/\$id
keyring = $dir/osd/\$id/keyring
osd objectstore = bluestore
bluestore block create = true
bluestore block size = $osd_block_bytes
bluestore block db create = false
bluestore block wal create = false
# A test cluster's memory: ~2 GB in all rather than 4 GB per OSD.
osd memory target = 939524096
bluestore cache autotune = false
bluestore cache size = 134217728
osd max object name len = 256
osd max object namespace len = 64
[mds]
mds data = $dir/mds/\$id
keyring = $dir/mds/\$id/keyring
mds cache memory limit = 268435456
[client]
# ceph-fuse enforces a subvolume's quota (the ceph.quota.max_bytes of its directory).
client quota = true
# Per process: a client remounted at once must not wait for the lock of the one still exiting.
admin socket = $dir/run/\$name.\$pid.asok
pid file = $dir/run/\$name.\$pid.pid
log file = $dir/log/\$name.\$pid.log
EOF

  # Keys: the mon's, client.admin's, and the bootstrap of the first mon.
  ceph-authtool --create-keyring "$dir/mon.keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
  ceph-authtool --create-keyring "$keyring" --gen-key -n client.admin \
    --cap mon 'allow *' --cap osd 'allow *' --cap mds 'allow *' --cap mgr 'allow *' >/dev/null
  ceph-authtool "$dir/mon.keyring" --import-keyring "$keyring" >/dev/null
  chmod 600 "$keyring" "$dir/mon.keyring"
  monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$mon_port]" "$dir/monmap" >/dev/null
  ceph-mon --conf "$conf" --mkfs -i a --monmap "$dir/monmap" --keyring "$dir/mon.keyring" \
    >"$dir/log/mon-mkfs.log" 2>&1 \
    || cannot_start "ceph-mon --mkfs failed: $(tail -3 "$dir/log/mon-mkfs.log")"
  echo "$mon_port" >"$dir/mon.port"
  start_mon

  # mgr: the volumes module answers `ceph fs subvolume ...`.
  c auth get-or-create mgr.x mon 'allow profile mgr' osd 'allow *' mds 'allow *' \
    >"$dir/mgr/x/keyring"
  ceph-mgr --conf "$conf" -i x >>"$dir/log/daemons.out" 2>&1 || cannot_start "ceph-mgr exited $?"

  # OSDs: each a bluestore on a sparse file of its own. Their mkfs (a few seconds each) runs in
  # parallel.
  local i
  for i in $(seq 0 $((osd_count - 1))); do
    local uuid secret id
    uuid=$(uuidgen)
    secret=$(ceph-authtool --gen-print-key)
    id=$(echo "{\"cephx_secret\": \"$secret\"}" | c osd new "$uuid" -i -)
    [ "$id" = "$i" ] || fail "ceph osd new gave id $id, expected $i"
    mkdir -p "$dir/osd/$i"
    ceph-authtool --create-keyring "$dir/osd/$i/keyring" --name "osd.$i" --add-key "$secret" \
      >/dev/null
    ( ceph-osd --conf "$conf" -i "$i" --mkfs --osd-uuid "$uuid" >"$dir/log/osd$i-mkfs.log" 2>&1 \
        && ceph-osd --conf "$conf" -i "$i" >>"$dir/log/daemons.out" 2>&1 ) &
  done
  for i in $(seq 0 $((osd_count - 1))); do
    wait -n || cannot_start "an OSD does not start: $(tail -3 "$dir"/log/osd*-mkfs.log)"
  done

  # MDS, then the file system on two pools of size 3.
  c auth get-or-create mds.a mon 'allow profile mds' osd 'allow rwx' mds 'allow' \
    mgr 'allow profile mds' >"$dir/mds/a/keyring"
  ceph-mds --conf "$conf" -i a >>"$dir/log/daemons.out" 2>&1 || cannot_start "ceph-mds exited $?"
  wait_for 60 osds_up \
    || fail "the $osd_count OSDs do not come up: $(tail -5 "$dir"/log/osd.*.log 2>/dev/null)"
  c osd pool create "cephfs.$fs_name.meta" 16 16 >/dev/null 2>&1
  c osd pool create "cephfs.$fs_name.data" 32 32 >/dev/null 2>&1
  c fs new "$fs_name" "cephfs.$fs_name.meta" "cephfs.$fs_name.data" >/dev/null 2>&1
  wait_for 120 pgs_clean || fail "the PGs do not become active+clean: $(c status 2>&1)"
  wait_for 60 mds_active || fail "no MDS becomes active: $(c fs status 2>&1)"
  # The mgr's volumes module answers once the mgr is active.
  wait_for 60 c fs subvolumegroup ls "$fs_name" || fail "the mgr's volumes module does not answer"

  echo "ceph-test-cluster: started in $(( $(now_ms) - started )) ms" \
       "(1 mon, 1 mgr, $osd_count OSDs, 1 MDS, CephFS $fs_name of size 3)" >&2
  echo "CEPH_CONF=$conf"
  echo "CEPH_KEYRING=$keyring"
  echo "CEPH_NAME=client.admin"
  echo "CEPH_FS=$fs_name"
  echo "CEPH_MON=v2:127.0.0.1:$mon_port"
}

stop() {
  # ceph-fuse mounts first (a test that failed midway may leave some).
  if [ -r /proc/mounts ]; then
    awk -v d="$dir/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r | while read -r m; do
      umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
    done
  fi
  local pids=()
  for f in "$dir"/run/*.pid; do
    [ -f "$f" ] || continue
    local pid; pid=$(cat "$f")
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
  done
  for pid in "${pids[@]}"; do
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  rm -rf "$dir"
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  stop-mon)
    pid=$(daemon_pid mon.a) || fail "the mon does not run"
    kill -9 "$pid"
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    ;;
  start-mon)
    if daemon_pid mon.a >/dev/null; then exit 0; fi
    start_mon
    ;;
  stop-osd)
    n=${3:?osd number}
    pid=$(daemon_pid "osd.$n") || fail "osd.$n does not run"
    kill -9 "$pid"
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    # Marked down at once rather than after the heartbeat grace (20 s): clients move on.
    c osd down "$n" >/dev/null 2>&1 || true
    osd_count=$((osd_count - 1))
    wait_for 60 osds_up || fail "osd.$n is still up: $(c osd stat 2>&1)"
    ;;
  start-osd)
    n=${3:?osd number}
    if ! daemon_pid "osd.$n" >/dev/null; then
      ceph-osd --conf "$conf" -i "$n" >>"$dir/log/daemons.out" 2>&1 || fail "ceph-osd exited $?"
    fi
    wait_for 60 osds_up || fail "osd.$n does not come up: $(c osd stat 2>&1)"
    wait_for 120 pgs_clean || fail "the PGs do not recover: $(c pg stat 2>&1)"
    ;;
  *) echo "usage: $0 start|stop|stop-mon|start-mon|stop-osd N|start-osd N DIR" >&2; exit 2 ;;
esac
