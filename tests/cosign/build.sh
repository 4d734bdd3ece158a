#!/usr/bin/env bash
# Build cosign from the upstream Go module pinned in tests/cosign/go.mod, for
# the signature interoperability tests (`radwasm policy sign/verify`,
# ReconcilePolicy spec.verify). Test tooling only: nothing here is part of
# the product. The tests run it fully offline (no Rekor, no Fulcio, a
# loopback registry, HOME and COSIGN_* in a temporary directory).
#
# The binary goes to target/cosign-bin/<cosign-version>/cosign at the
# repository root and is reused while it is there and was built from the
# same inputs. The last line printed on stdout is its path; progress goes to
# stderr. Needs Go and, the first time, the Go module proxy (or a module
# cache holding the modules in go.sum). GO=/path/to/go picks the toolchain.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"

version="$(awk '($1 == "require" && $2 == "github.com/sigstore/cosign/v2") { print $3 }' "$here/go.mod" | head -n 1)"
if [[ -z "$version" ]]; then
  echo "build.sh: cannot read the cosign version from tests/cosign/go.mod" >&2
  exit 1
fi
out="$root/target/cosign-bin/$version"
goflags="-mod=readonly -trimpath -buildvcs=false"
ldflags="-s -w -X sigs.k8s.io/release-utils/version.gitVersion=$version"
want="$( (cd "$here" && cat go.mod go.sum tools.go && printf '%s\n' "$goflags" "$ldflags") | sha256sum | cut -d' ' -f1)"

built() { [[ -x "$out/cosign" && -f "$out/.inputs" && "$(cat "$out/.inputs")" == "$want" ]]; }
if built; then
  echo "$out/cosign"
  exit 0
fi

# shellcheck source=../go-toolchain.sh
source "$here/../go-toolchain.sh"

# One build at a time, whoever asks.
mkdir -p "$out"
exec 9> "$out/.lock"
flock 9
if built; then
  echo "$out/cosign"
  exit 0
fi
echo "build.sh: building cosign $version into $out" >&2
start=$(date +%s)
nice=()
if command -v nice > /dev/null 2>&1; then nice=(nice -n 10); fi
(
  cd "$here"
  CGO_ENABLED=0 GOFLAGS="$goflags" GOTOOLCHAIN=local \
    "${nice[@]}" "$go_cmd" build -ldflags "$ldflags" -o "$out/cosign.tmp" github.com/sigstore/cosign/v2/cmd/cosign
)
mv "$out/cosign.tmp" "$out/cosign"
echo "$want" > "$out/.inputs"
echo "build.sh: cosign built in $(($(date +%s) - start)) s" >&2
echo "$out/cosign"
