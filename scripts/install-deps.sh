#!/usr/bin/env bash
# Installs the Debian packages gpuhub needs to build, test and run, only when some are missing.
# Safe to run repeatedly: when everything is present it only asks dpkg and exits (well under a second).
set -euo pipefail

build_packages=(
  build-essential cmake ninja-build ccache pkg-config clang libclang-rt-14-dev
  libboost1.74-dev nlohmann-json3-dev libtomlplusplus-dev libcli11-dev
  libsqlite3-dev libpq-dev libsodium-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev libssl-dev openssl ca-certificates
  libhpdf-dev fonts-dejavu-core libjemalloc-dev
)
# wrk and valgrind: bench/http/side_by_side.sh, load.sh and profile.sh; poppler-utils (pdftotext):
# the tests read invoice PDFs back. docker.io, debootstrap and openssh-client: the real-engine
# suite (tests/agent/agent_real_engine_test.cc, scripts/docker-test-env.sh) runs a dockerd of its
# own with an sshd image built from Debian packages and logs in over SSH.
test_packages=(postgresql-15 postgresql-client-15 curl wrk valgrind chromium poppler-utils
               docker.io debootstrap openssh-client)
# cryptsetup-bin: tests/agent/agent_real_disks_test (luksFormat, luksErase on a loop device;
# losetup and blkdiscard come with util-linux).
test_packages+=(cryptsetup-bin)
# zbar-tools (zbarimg): tests/e2e/two_factor.test.mjs decodes the account page's QR code back.
test_packages+=(zbar-tools)
# Ceph 16.2 (pacific): scripts/ceph-test-cluster.sh starts a throwaway one-host cluster (mon, mgr,
# 3 bluestore OSDs on files, MDS, CephFS) for tests/storage/ceph_cluster_test; ceph-fuse mounts
# its subvolumes; ceph-common is the `ceph` CLI src/storage drives.
test_packages+=(ceph-mon ceph-osd ceph-mgr ceph-mds ceph-fuse ceph-common)

want=("${build_packages[@]}")
if [ "${1:-}" = "--with-test-tools" ]; then want+=("${test_packages[@]}"); fi

missing=()
for p in "${want[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$status" = "installed" ] || missing+=("$p")
done
# Node.js may come from NodeSource (whose nodejs bundles npm and conflicts with Debian's npm package),
# so ask for the commands, not the packages.
if [ "${1:-}" = "--with-test-tools" ] && ! command -v npm >/dev/null 2>&1; then missing+=(nodejs npm); fi
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
