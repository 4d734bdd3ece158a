#!/usr/bin/env bash
# Build Radius's own control plane from its source, for the tests against the
# real Radius (tests/support/src/realradius/, docs/radius-real.md): UCP
# (`ucpd`), the Applications resource provider (`applications-rp`), the
# dynamic resource provider (`dynamic-rp`), and Radius's own Kubernetes
# controller (`controller`, for the side-by-side benchmarks). Test
# infrastructure only: nothing here is part of the product, and none of
# Radius's code is kept in this repository.
#
# The source is Radius at commit 8f1079d7bc0556e1e16cb00de5040e702d71adc7, as
# a `git archive`-style tarball (a top folder `radius/`) or a checkout:
# RADIUS_SOURCE names it. Unset, the tarball is looked for where this
# project's CI lays it: shared/radius/radius-8f1079d.tar.gz beside the clone.
# Radius's own module is not served by the Go module proxy; every dependency
# is, so the first build needs the proxy (or a module cache holding them).
#
# Everything goes to target/radius-bin/8f1079d/ at the repository root: the
# four binaries, and src/ (the source tree, whose
# deploy/manifest/built-in-providers/ UCP registers at start-up). They are
# reused while they are there and were built from the same inputs. The last
# line printed on stdout is that directory; progress goes to stderr.
# GO=/path/to/go picks the toolchain.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
commit=8f1079d
bins=(ucpd applications-rp dynamic-rp controller)

source_path="${RADIUS_SOURCE:-$(dirname "$root")/shared/radius/radius-${commit}.tar.gz}"
if [[ ! -e "$source_path" ]]; then
  echo "build.sh: Radius's source is not at $source_path; set RADIUS_SOURCE to a tarball or checkout of radius-project/radius at commit ${commit}" >&2
  exit 1
fi

out="$root/target/radius-bin/$commit"
goflags="-mod=mod -trimpath -buildvcs=false"
ldflags="-s -w"

# What the binaries are built from: the source (the tarball's bytes, or a
# checkout's tracked file list and go.sum) and the flags.
inputs_hash() {
  (
    if [[ -f "$source_path" ]]; then
      sha256sum < "$source_path"
    else
      (cd "$source_path" && cat go.mod go.sum && find cmd pkg -name '*.go' -newer go.mod -print | sort)
    fi
    printf '%s\n' "CGO_ENABLED=0" "$goflags" "$ldflags" "${bins[*]}"
  ) | sha256sum | cut -d' ' -f1
}
want="$(inputs_hash)"

built() {
  [[ -f "$out/.inputs" && "$(cat "$out/.inputs")" == "$want" ]] || return 1
  local b
  for b in "${bins[@]}"; do [[ -x "$out/$b" ]] || return 1; done
  [[ -d "$out/src/deploy/manifest/built-in-providers" ]]
}

if built; then
  echo "$out"
  exit 0
fi

# shellcheck source=../go-toolchain.sh
source "$here/../go-toolchain.sh"

# One build at a time, whoever asks (parallel tests, several cargo runs).
mkdir -p "$root/target/radius-bin"
exec 9> "$root/target/radius-bin/.lock"
flock 9
if built; then
  echo "$out"
  exit 0
fi

echo "build.sh: building Radius ${commit} (${bins[*]}) into $out (the first build takes several minutes)" >&2
start=$(date +%s)
tmp="$(mktemp -d "$root/target/radius-bin/.build.XXXXXX")"
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM # so that the EXIT trap cleans up

if [[ -f "$source_path" ]]; then
  tar -xzf "$source_path" -C "$tmp"
  mv "$tmp/radius" "$tmp/src"
else
  cp -a "$source_path" "$tmp/src"
fi

export CGO_ENABLED=0
export GOFLAGS="$goflags"
export GOTOOLCHAIN=local # the go.mod's toolchain line never downloads one

nice=()
if command -v nice > /dev/null 2>&1; then nice=(nice -n 10); fi
pkgs=()
for b in "${bins[@]}"; do pkgs+=("./cmd/$b"); done
(cd "$tmp/src" && "${nice[@]}" "$go_cmd" build -ldflags="$ldflags" -o "$tmp/" "${pkgs[@]}")

for b in "${bins[@]}"; do
  [[ -x "$tmp/$b" ]] || { echo "build.sh: the build made no $b" >&2; exit 1; }
done
echo "$want" > "$tmp/.inputs"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "build.sh: built in $(($(date +%s) - start)) s" >&2
echo "$out"
