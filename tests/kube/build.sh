#!/usr/bin/env bash
# Build the real Kubernetes control plane (kube-apiserver,
# kube-controller-manager, etcd) from the upstream Go modules pinned in
# tests/kube/go.mod and tests/kube/cmd/etcd/go.mod, for the end-to-end tests.
# Test infrastructure only: nothing here is part of the product.
#
# The binaries go to target/kube-bin/<kubernetes-version>-<etcd-version>/ at
# the repository root and are reused while they are there and were built from
# the same inputs, so only the first run (or a version bump) compiles. The
# last line printed on stdout is that directory; progress goes to stderr.
#
# Needs Go (>= the `go` line of cmd/etcd/go.mod) and, the first time, the Go
# module proxy (or a module cache holding the modules in the go.sum files).
# GO=/path/to/go picks the toolchain; otherwise `go` on PATH, then
# /usr/local/go/bin/go.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"

# The versions, read from the go.mod files so that bumping one rebuilds.
modversion() { # <go.mod> <module path>
  awk -v m="$2" '($1 == m) { print $2 } ($1 == "require" && $2 == m) { print $3 }' "$1" | head -n 1
}
k8s_version="$(modversion "$here/go.mod" k8s.io/kubernetes)"
etcd_version="$(modversion "$here/cmd/etcd/go.mod" go.etcd.io/etcd/server/v3)"
if [[ -z "$k8s_version" || -z "$etcd_version" ]]; then
  echo "build.sh: cannot read the k8s.io/kubernetes or etcd version from the go.mod files" >&2
  exit 1
fi

out="$root/target/kube-bin/${k8s_version}-${etcd_version}"
bins=(kube-apiserver kube-controller-manager etcd)

# The build settings. Reproducible from the committed go.mod/go.sum:
# -mod=readonly refuses to change them (and every module is checked against
# go.sum); -trimpath and -buildvcs=false keep local paths and this
# repository's git state out of the binaries; CGO_ENABLED=0 (exported below)
# gives static binaries and needs no C toolchain.
goflags="-mod=readonly -trimpath -buildvcs=false"
# What upstream's hack/lib/version.sh stamps, so /version reports the release
# (and -s -w as upstream does for non-debug builds).
minor="${k8s_version#v1.}"
minor="${minor%%.*}"
k8s_ldflags="-s -w"
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
  k8s_ldflags+=" -X ${pkg}.gitVersion=${k8s_version} -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=${minor} -X ${pkg}.gitTreeState=clean"
done
etcd_ldflags="-s -w"

# Everything the binaries are built from; a change in any of it rebuilds even
# without a version bump (e.g. a new replace line). A new Go toolchain does
# not: remove target/kube-bin/ to force a rebuild.
inputs_hash() {
  (
    cd "$here"
    cat go.mod go.sum cmd/kube-apiserver/main.go cmd/kube-controller-manager/main.go \
      cmd/etcd/go.mod cmd/etcd/go.sum cmd/etcd/main.go
    printf '%s\n' "CGO_ENABLED=0" "$goflags" "$k8s_ldflags" "$etcd_ldflags"
  ) | sha256sum | cut -d' ' -f1
}
want="$(inputs_hash)"

built() {
  [[ -f "$out/.inputs" && "$(cat "$out/.inputs")" == "$want" ]] || return 1
  local b
  for b in "${bins[@]}"; do [[ -x "$out/$b" ]] || return 1; done
}

if built; then
  echo "$out"
  exit 0
fi

# shellcheck source=../go-toolchain.sh
source "$here/../go-toolchain.sh"

# One build at a time, whoever asks (parallel tests, several cargo runs).
mkdir -p "$root/target/kube-bin"
exec 9> "$root/target/kube-bin/.lock"
flock 9
if built; then # someone else built it while we waited
  echo "$out"
  exit 0
fi

echo "build.sh: building kube-apiserver, kube-controller-manager ${k8s_version} and etcd ${etcd_version} into $out (the first build takes several minutes)" >&2
start=$(date +%s)
tmp="$(mktemp -d "$root/target/kube-bin/.build.XXXXXX")"
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM # so that the EXIT trap cleans up

export CGO_ENABLED=0
export GOFLAGS="$goflags"
export GOTOOLCHAIN=local # the go.mod files' toolchain lines never download one

# Niced: on a first `cargo test` this build shares the CPUs with other tests
# that have time bounds of their own.
nice=()
if command -v nice > /dev/null 2>&1; then nice=(nice -n 10); fi

(cd "$here" && "${nice[@]}" "$go_cmd" build -ldflags="$k8s_ldflags" -o "$tmp/" ./cmd/kube-apiserver ./cmd/kube-controller-manager)
(cd "$here/cmd/etcd" && "${nice[@]}" "$go_cmd" build -ldflags="$etcd_ldflags" -o "$tmp/etcd" .)

for b in "${bins[@]}"; do
  [[ -x "$tmp/$b" ]] || { echo "build.sh: the build made no $b" >&2; exit 1; }
done
echo "$want" > "$tmp/.inputs"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "build.sh: built in $(($(date +%s) - start)) s" >&2
echo "$out"
