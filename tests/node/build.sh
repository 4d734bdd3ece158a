#!/usr/bin/env bash
# Build what the node tests run beside the real control plane: kubelet,
# kube-proxy and kube-scheduler from the upstream Go modules pinned in
# tests/node/go.mod (the same k8s.io/kubernetes release as tests/kube/go.mod),
# and the pod sandbox ("pause") image from tests/node/pause/pause.c as an OCI
# archive that `ctr images import` takes. Test infrastructure only: nothing
# here is part of the product.
#
# The results go to target/node-bin/<kubernetes-version>/ at the repository
# root and are reused while they are there and were built from the same
# inputs, so only the first run (or a version bump) compiles. The last line
# printed on stdout is that directory; progress goes to stderr.
#
# Needs Go (as tests/kube/build.sh), gcc with a static libc (Debian's
# libc6-dev) and tar/sha256sum. GO=/path/to/go picks the toolchain.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"

modversion() { # <go.mod> <module path>
  awk -v m="$2" '($1 == m) { print $2 } ($1 == "require" && $2 == m) { print $3 }' "$1" | head -n 1
}
k8s_version="$(modversion "$here/go.mod" k8s.io/kubernetes)"
kube_version="$(modversion "$here/../kube/go.mod" k8s.io/kubernetes)"
if [[ -z "$k8s_version" ]]; then
  echo "build.sh: cannot read the k8s.io/kubernetes version from tests/node/go.mod" >&2
  exit 1
fi
if [[ "$k8s_version" != "$kube_version" ]]; then
  echo "build.sh: tests/node/go.mod pins k8s.io/kubernetes $k8s_version but the control plane (tests/kube/go.mod) is $kube_version; they must be the same release" >&2
  exit 1
fi

out="$root/target/node-bin/${k8s_version}"
bins=(kubelet kube-proxy kube-scheduler)
# The name the pause image is imported under (containerd's sandbox_image).
pause_ref="localhost/radwasm-pause:1"

goflags="-mod=readonly -trimpath -buildvcs=false"
minor="${k8s_version#v1.}"
minor="${minor%%.*}"
k8s_ldflags="-s -w"
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
  k8s_ldflags+=" -X ${pkg}.gitVersion=${k8s_version} -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=${minor} -X ${pkg}.gitTreeState=clean"
done
cflags="-static -O2 -Wall -Wextra -Werror -s"

inputs_hash() {
  (
    cd "$here"
    cat go.mod go.sum cmd/kubelet/main.go cmd/kube-proxy/main.go cmd/kube-scheduler/main.go pause/pause.c
    printf '%s\n' "CGO_ENABLED=0" "$goflags" "$k8s_ldflags" "$cflags" "$pause_ref"
  ) | sha256sum | cut -d' ' -f1
}
want="$(inputs_hash)"

built() {
  [[ -f "$out/.inputs" && "$(cat "$out/.inputs")" == "$want" ]] || return 1
  local b
  for b in "${bins[@]}"; do [[ -x "$out/$b" ]] || return 1; done
  [[ -f "$out/pause-image.tar" && -f "$out/pause-image.ref" ]]
}

if built; then
  echo "$out"
  exit 0
fi

# shellcheck source=../go-toolchain.sh
source "$here/../go-toolchain.sh"
command -v gcc > /dev/null || { echo "build.sh: no gcc (Debian: gcc, libc6-dev) for the pause image" >&2; exit 1; }

mkdir -p "$root/target/node-bin"
exec 9> "$root/target/node-bin/.lock"
flock 9
if built; then
  echo "$out"
  exit 0
fi

echo "build.sh: building kubelet, kube-proxy, kube-scheduler ${k8s_version} and the pause image into $out (the first build takes several minutes)" >&2
start=$(date +%s)
tmp="$(mktemp -d "$root/target/node-bin/.build.XXXXXX")"
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

export CGO_ENABLED=0
export GOFLAGS="$goflags"
export GOTOOLCHAIN=local

nice=()
if command -v nice > /dev/null 2>&1; then nice=(nice -n 10); fi

(cd "$here" && "${nice[@]}" "$go_cmd" build -ldflags="$k8s_ldflags" -o "$tmp/" ./cmd/kubelet ./cmd/kube-proxy ./cmd/kube-scheduler)

# The pause image: one layer holding /pause, written as an OCI image layout
# in a tar (what `ctr images import` and `podman load` read). Deterministic:
# sorted entries, fixed owners and times, so the digests depend on pause.c only.
# shellcheck disable=SC2086 # cflags is a list of flags
"${nice[@]}" gcc $cflags -o "$tmp/pause" "$here/pause/pause.c"
img="$tmp/pause-oci"
mkdir -p "$img/rootfs" "$img/layout/blobs/sha256"
install -m 0755 "$tmp/pause" "$img/rootfs/pause"
tarflags=(--sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 --format=posix --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime)
tar "${tarflags[@]}" -C "$img/rootfs" -cf "$img/layer.tar" pause
blob() { # <file> -> prints its sha256, stores it as a blob
  local d
  d="$(sha256sum "$1" | cut -d' ' -f1)"
  cp "$1" "$img/layout/blobs/sha256/$d"
  echo "$d"
}
size() { stat -c %s "$1"; }
layer="$(blob "$img/layer.tar")"
printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":["/pause"],"User":"65535:65535"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created_by":"tests/node/build.sh: pause.c, gcc -static"}]}' \
  "$layer" > "$img/config.json"
config="$(blob "$img/config.json")"
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
  "$config" "$(size "$img/config.json")" "$layer" "$(size "$img/layer.tar")" > "$img/manifest.json"
manifest="$(blob "$img/manifest.json")"
printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"amd64","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
  "$manifest" "$(size "$img/manifest.json")" "$pause_ref" "${pause_ref##*:}" > "$img/layout/index.json"
printf '{"imageLayoutVersion":"1.0.0"}' > "$img/layout/oci-layout"
tar "${tarflags[@]}" -C "$img/layout" -cf "$tmp/pause-image.tar" oci-layout index.json blobs
echo "$pause_ref" > "$tmp/pause-image.ref"
rm -rf "$img" "$tmp/pause"

for b in "${bins[@]}"; do
  [[ -x "$tmp/$b" ]] || { echo "build.sh: the build made no $b" >&2; exit 1; }
done
echo "$want" > "$tmp/.inputs"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "build.sh: built in $(($(date +%s) - start)) s" >&2
echo "$out"
