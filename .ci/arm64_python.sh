#!/usr/bin/env bash
# An aarch64 CPython to run the aarch64 wheel under emulation (tests/test_wheels.py): qemu-user
# from Debian, and Debian's arm64 python3.11 unpacked into a directory (no container, nothing of
# the host replaced).  Prints the command that runs that interpreter; exits non-zero when it cannot
# be set up (the test then skips, naming why).
set -euo pipefail
root="${PYKBATCH_ARM64_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/pykbatch-arm64-python}"
if [ ! -x "$root/usr/bin/python3.11" ]; then
  command -v apt-get >/dev/null || { echo "no apt-get: cannot fetch Debian's arm64 python" >&2; exit 1; }
  command -v qemu-aarch64-static >/dev/null || apt-get install -y -qq qemu-user-static >/dev/null
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    dpkg --add-architecture arm64
  fi
  apt-get update -qq >/dev/null
  debs="$(mktemp -d)"
  (cd "$debs" && apt-get download -qq \
     python3.11-minimal:arm64 libpython3.11-minimal:arm64 libpython3.11-stdlib:arm64 libc6:arm64 \
     zlib1g:arm64 libexpat1:arm64 libffi8:arm64 libssl3:arm64 libbz2-1.0:arm64 liblzma5:arm64 \
     libsqlite3-0:arm64 libncursesw6:arm64 libtinfo6:arm64 libreadline8:arm64 libuuid1:arm64 \
     libgcc-s1:arm64 libstdc++6:arm64 libcrypt1:arm64 libdb5.3:arm64 libgdbm6:arm64 libnsl2:arm64 \
     libtirpc3:arm64 >/dev/null 2>&1)
  mkdir -p "$root"
  for deb in "$debs"/*.deb; do dpkg -x "$deb" "$root"; done
  rm -rf "$debs"
fi
command -v qemu-aarch64-static >/dev/null || { echo "qemu-aarch64-static missing" >&2; exit 1; }
echo "qemu-aarch64-static -L $root $root/usr/bin/python3.11"
