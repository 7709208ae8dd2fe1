#!/usr/bin/env bash
# Installs the Debian packages dtnn needs to build, test and run its demo, when missing.
# Idempotent and quiet when everything is there; needs root only when something is missing.
# Extra package names as arguments are installed the same way (scripts/fuzz.sh: clang,
# scripts/valgrind.sh: valgrind).
set -euo pipefail

packages=(cmake make gcc libc6-dev libopenblas-dev zlib1g-dev libjpeg62-turbo-dev libpng-dev
          libprotobuf-c-dev protobuf-c-compiler libonnx-dev
          dataset-fashion-mnist
          libopenmpi-dev openmpi-bin "$@")
missing=()
for p in "${packages[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

if [[ $(id -u) -ne 0 ]]; then
    echo "dtnn: missing Debian packages: ${missing[*]}" >&2
    echo "dtnn: run as root, or: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
fi
echo "dtnn: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
