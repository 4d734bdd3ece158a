#!/usr/bin/env bash
# Build the controller image from scratch (see Containerfile): no base image
# is pulled. By default the deployable binary is built first: the `deploy`
# profile (release with whole-program LTO, one codegen unit, no debug info),
# without the `dev` feature, so it carries no simulators.
#
#   deploy/image/build.sh [--binary PATH] [--tag NAME:TAG] [--context DIR]
#
#   --binary   use this radwasm binary instead of building one
#   --tag      image name (default localhost/radwasm:<version from Cargo.toml>,
#              the chart's default image)
#   --context  where to assemble the build context (default target/image)
#
# Needs podman (or buildah, or docker) and ldd. The binary's shared
# libraries (glibc) are copied into the image with the paths ldd reports.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
binary=""
version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/Cargo.toml" | head -n 1)"
tag="localhost/radwasm:${version}"
context="$repo/target/image"
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary="$2"; shift 2 ;;
    --tag) tag="$2"; shift 2 ;;
    --context) context="$2"; shift 2 ;;
    *) echo "build.sh: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
if [ -z "$binary" ]; then
  (cd "$repo" && cargo build --locked --profile deploy -p radwasm --no-default-features --bin radwasm)
  binary="$repo/target/deploy/radwasm"
fi
[ -x "$binary" ] || { echo "build.sh: $binary is not an executable" >&2; exit 2; }

rm -rf "$context"
mkdir -p "$context/rootfs"
cp "$repo/deploy/image/Containerfile" "$context/Containerfile"
cp "$binary" "$context/rootfs/radwasm"
strip "$context/rootfs/radwasm" 2> /dev/null || true
# Every shared library the binary loads, and the dynamic loader, at the
# paths the binary will look for them.
for library in $(ldd "$binary" | grep -o '/[^ ]*'); do
  mkdir -p "$context/rootfs$(dirname "$library")"
  cp -L "$library" "$context/rootfs$library"
done
# CA certificates, for registries and URLs a ReconcilePolicy names.
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  mkdir -p "$context/rootfs/etc/ssl/certs"
  cp /etc/ssl/certs/ca-certificates.crt "$context/rootfs/etc/ssl/certs/"
fi

if command -v podman > /dev/null; then
  podman build --tag "$tag" --file "$context/Containerfile" "$context"
elif command -v buildah > /dev/null; then
  buildah bud --tag "$tag" --file "$context/Containerfile" "$context"
elif command -v docker > /dev/null; then
  docker build --tag "$tag" --file "$context/Containerfile" "$context"
else
  echo "build.sh: no podman, buildah or docker to build the image with" >&2
  exit 1
fi
echo "built $tag"
