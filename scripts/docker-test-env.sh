#!/usr/bin/env bash
# A throwaway Docker engine for the real-engine tests (tests/agent/agent_real_engine_test.cc), from
# Debian's docker.io. Contract (other suites rely on it):
#
#   docker-test-env.sh start DIR
#     Starts a dockerd of its own under DIR: data root DIR/data, exec root DIR/exec, socket
#     DIR/docker.sock, log DIR/dockerd.log, its own address pool (a /20 of 10.213.0.0/16), no
#     default bridge (--bridge=none: containers join the networks their creator makes, as the
#     agent does), and on its PATH a stand-in
#     `nvidia-container-runtime-hook` (the only fake: it stands for the GPU). Docker's `nvidia`
#     device requests then work as on a GPU host: dockerd runs the stand-in as the OCI prestart
#     hook, and the stand-in appends one line per container start to DIR/hook.log:
#         <container id> <NVIDIA_VISIBLE_DEVICES of the container's OCI config>
#     Makes sure the image gpuhub-test-sshd:bookworm is loaded: a Debian bookworm rootfs with
#     openssh-server (debootstrap --variant=minbase), built once per machine and cached as a
#     tarball under /var/cache/gpuhub-test/ (GPUHUB_TEST_CACHE overrides), imported into each new
#     dockerd. Prints shell-evaluable lines on stdout:
#         DOCKER_HOST=unix://DIR/docker.sock
#         GPUHUB_TEST_SSHD_IMAGE=gpuhub-test-sshd:bookworm
#         GPUHUB_TEST_HOOK_LOG=DIR/hook.log
#     Exit status 3 with one line "docker-test-env: dockerd cannot start: WHY" on stderr when no
#     dockerd can run here (not installed, not root, the daemon dies): callers skip on that one.
#     Any other failure (the image cannot be built or imported) exits 1: callers fail on it.
#     DIR must be short: a unix socket path is limited to 108 bytes.
#
#   docker-test-env.sh stop DIR
#     Removes the containers, networks and volumes of that dockerd, stops it (and its containerd
#     and shims), unmounts what is still mounted under DIR and removes DIR.
#
#   docker-test-env.sh restart DIR
#     Stops that dockerd alone (SIGTERM: its containers stop as on a host's reboot) and starts it
#     again on the same data root; the containers with a restart policy come back.
#
# Times measured here are logged on stderr (the image build once, the import per dockerd).
set -euo pipefail
cmd=${1:?start|stop|restart}
dir=${2:?directory}

image=gpuhub-test-sshd:bookworm
cache=${GPUHUB_TEST_CACHE:-/var/cache/gpuhub-test}
rootfs=$cache/sshd-bookworm.tar
docker=/usr/bin/docker      # Debian's client: /usr/local/bin/docker may be a newer one
dockerd=/usr/sbin/dockerd   # not on root's default PATH in scripts

cannot_start() {
  echo "docker-test-env: dockerd cannot start: $*" >&2
  exit 3
}
fail() {
  echo "docker-test-env: $*" >&2
  exit 1
}
now_ms() { date +%s%3N; }

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
sock=$dir/docker.sock
d() { "$docker" -H "unix://$sock" "$@"; }

dockerd_pid() {
  local pid
  pid=$(cat "$dir/docker.pid" 2>/dev/null || true)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then echo "$pid"; fi
}

write_hook() {
  mkdir -p "$dir/bin"
  cat >"$dir/bin/nvidia-container-runtime-hook" <<EOF
#!/bin/sh
# Stand-in for the NVIDIA container toolkit's prestart hook (the GPU is the only fake): records
# which GPUs Docker's nvidia device request gave the container, and lets it start.
state=\$(cat)
id=\$(printf '%s' "\$state" | sed -n 's/.*"id" *: *"\\([^"]*\\)".*/\\1/p')
bundle=\$(printf '%s' "\$state" | sed -n 's/.*"bundle" *: *"\\([^"]*\\)".*/\\1/p')
devices=\$(grep -o '"NVIDIA_VISIBLE_DEVICES=[^"]*"' "\$bundle/config.json" | tail -n 1 |
  sed 's/^"NVIDIA_VISIBLE_DEVICES=//; s/"\$//')
echo "\$id \$devices" >> "$dir/hook.log"
exit 0
EOF
  chmod 0755 "$dir/bin/nvidia-container-runtime-hook"
  : >>"$dir/hook.log"
}

# Every dockerd on the host shares its routing table, and libnetwork does not avoid subnets that
# another daemon's bridges use: each dockerd of ours gets its own address pool, 10.213.16k.0/20
# (16 networks of /24), k = the first slot that is free. Slots live in $cache/pools/k (the DIR
# that holds it), under the lock.
pool_base() {
  mkdir -p "$cache/pools"
  exec 8>"$cache/.pools.lock"
  flock 8
  local k owner
  for k in $(seq 0 15); do
    owner=$(cat "$cache/pools/$k" 2>/dev/null || true)
    if [ "$owner" = "$dir" ] || [ -z "$owner" ] || [ ! -d "$owner" ]; then
      echo "$dir" >"$cache/pools/$k"
      exec 8>&-
      echo "10.213.$((16 * k)).0/20"
      return 0
    fi
  done
  exec 8>&-
  cannot_start "16 test dockerds already run on this host (see $cache/pools)"
}

release_pool() {
  local f
  for f in "$cache"/pools/*; do
    [ -f "$f" ] && [ "$(cat "$f" 2>/dev/null)" = "$dir" ] && rm -f "$f"
  done
  return 0
}

start_dockerd() {
  [ "$(id -u)" -eq 0 ] || cannot_start "not root (a dockerd needs root here)"
  [ -x "$dockerd" ] || cannot_start "$dockerd is missing (apt-get install docker.io)"
  [ -x "$docker" ] || cannot_start "$docker is missing (apt-get install docker.io)"
  [ ${#sock} -lt 100 ] || cannot_start "socket path $sock is too long for a unix socket"
  [ -z "$(dockerd_pid)" ] || fail "a dockerd already runs under $dir"
  rm -f "$sock" "$dir/docker.pid"
  local t0 pool why=""
  pool=$(pool_base)
  # One dockerd of ours initialises at a time: each creates the host's shared iptables chains
  # (DOCKER-ISOLATION-STAGE-2, ...) by "check, then create", and two at once fail with "Chain
  # already exists". The lock is held until the daemon answers (its network controller is up).
  mkdir -p "$cache"
  exec 7>"$cache/.start.lock"
  flock 7
  t0=$(now_ms)
  for attempt in 1 2; do  # a second try: a dockerd not of ours may race the same way
    # setsid: the daemon outlives this script and the test's process group.
    PATH="$dir/bin:/usr/sbin:/usr/bin:/sbin:/bin" setsid "$dockerd" \
      --data-root "$dir/data" --exec-root "$dir/exec" -H "unix://$sock" \
      --pidfile "$dir/docker.pid" --bridge=none --default-address-pool "base=$pool,size=24" \
      >>"$dir/dockerd.log" 2>&1 </dev/null 7>&- 8>&- 9>&- &
    local pid=$!
    for _ in $(seq 1 300); do
      if d version --format '{{.Server.APIVersion}}' >/dev/null 2>&1; then
        exec 7>&-
        echo "docker-test-env: dockerd $(d version --format '{{.Server.Version}}') up under" \
          "$dir in $(($(now_ms) - t0)) ms" >&2
        return 0
      fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      why="no answer on $sock within 30 s"
      break
    fi
    # Its last words (an error may end in a line of its own: " (exit status 1)").
    why="it exited (attempt $attempt): $(grep -v '^$' "$dir/dockerd.log" | grep -v '^time=' |
      tail -n 2 | tr '\n' ' ' | cut -c1-300)"
    rm -f "$sock" "$dir/docker.pid"
  done
  exec 7>&-
  cannot_start "$why"
}

# The rootfs tarball, built once per machine (under a lock: test binaries start in parallel).
ensure_rootfs() {
  mkdir -p "$cache"
  exec 9>"$cache/.lock"
  flock 9
  if [ ! -s "$rootfs" ]; then
    command -v debootstrap >/dev/null 2>&1 || PATH=$PATH:/usr/sbin:/sbin
    command -v debootstrap >/dev/null 2>&1 || fail "debootstrap is missing (apt-get install debootstrap)"
    local mirror t0 build
    mirror=$(sed -n 's/^URIs: *\([^ ]*debian\)\/*$/\1/p' /etc/apt/sources.list.d/debian.sources \
               2>/dev/null | head -n 1)
    [ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $3 == "bookworm" {print $2; exit}' \
                                 /etc/apt/sources.list 2>/dev/null || true)
    [ -n "$mirror" ] || mirror=http://deb.debian.org/debian
    t0=$(now_ms)
    build=$(mktemp -d "$cache/build.XXXXXX")
    if ! debootstrap --variant=minbase --include=openssh-server bookworm "$build/root" "$mirror" \
          >"$cache/debootstrap.log" 2>&1; then
      rm -rf "$build"
      fail "debootstrap of the sshd image failed (see $cache/debootstrap.log): $(tail -n 1 "$cache/debootstrap.log")"
    fi
    tar -C "$build/root" -cf "$rootfs.tmp" .
    rm -rf "$build"
    mv "$rootfs.tmp" "$rootfs"
    echo "docker-test-env: built $rootfs from $mirror in $(($(now_ms) - t0)) ms" >&2
  fi
  exec 9>&-
}

ensure_image() {
  if d image inspect "$image" >/dev/null 2>&1; then return 0; fi
  ensure_rootfs
  local t0
  t0=$(now_ms)
  d import "$rootfs" "$image" >/dev/null || fail "docker import of $rootfs failed"
  echo "docker-test-env: imported $image in $(($(now_ms) - t0)) ms" >&2
}

stop_dockerd() {
  local pid
  pid=$(dockerd_pid)
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 300); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  # Its containerd and shims, found by the exec root they were started with (ours alone).
  local p
  for p in $(grep -l -s -F "$dir/" /proc/[0-9]*/cmdline | cut -d/ -f3); do
    case "$(cat "/proc/$p/comm" 2>/dev/null)" in
      containerd*) kill -KILL "$p" 2>/dev/null || true ;;
    esac
  done
  rm -f "$sock" "$dir/docker.pid"
}

case "$cmd" in
  start)
    write_hook
    start_dockerd
    ensure_image
    echo "DOCKER_HOST=unix://$sock"
    echo "GPUHUB_TEST_SSHD_IMAGE=$image"
    echo "GPUHUB_TEST_HOOK_LOG=$dir/hook.log"
    ;;
  restart)
    stop_dockerd
    start_dockerd
    ;;
  stop)
    if [ -z "$(dockerd_pid)" ] && [ -d "$dir/data" ] && [ -x "$dockerd" ]; then
      # Started again briefly so that its networks (host bridges) and mounts are cleaned up.
      (start_dockerd) >/dev/null 2>&1 || true
    fi
    if [ -n "$(dockerd_pid)" ]; then
      ids=$(d ps -aq 2>/dev/null || true)
      [ -z "$ids" ] || d rm -f -v $ids >/dev/null 2>&1 || true
      d network prune -f >/dev/null 2>&1 || true
      d volume prune -f >/dev/null 2>&1 || true
    fi
    stop_dockerd
    # Deepest first: overlay mounts, netns and shm bind mounts under the data and exec roots.
    { grep -F " $dir/" /proc/self/mountinfo || true; } | awk '{print $5}' | sort -r | while read -r m; do
      umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
    done
    # Deleting overlay2's layers takes up to 20 s here once a container ran: DIR is renamed away
    # (gone for the caller at once) and the copy deleted in the background.
    trash="$dir.deleting"
    if mv "$dir" "$trash" 2>/dev/null; then
      setsid rm -rf "$trash" </dev/null >/dev/null 2>&1 &
    else
      rm -rf "$dir"
    fi
    release_pool
    ;;
  *)
    echo "usage: docker-test-env.sh start|stop|restart DIR" >&2
    exit 2
    ;;
esac
