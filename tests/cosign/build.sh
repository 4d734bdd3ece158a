#!/usr/bin/env bash
# Build cosign from the upstream Go module, for the signature
# interoperability tests (`radwasm policy sign/verify`, ReconcilePolicy
# spec.verify). Test tooling only: nothing here is part of the product. The
# tests run it fully offline (no Rekor, no Fulcio, a loopback registry, HOME
# and COSIGN_* in a temporary directory).
#
# `build.sh` (or `build.sh 2`) builds cosign 2, pinned in tests/cosign/go.mod,
# whose `cosign sign` stores signatures at the `sha256-<hex>.sig` tag;
# `build.sh 3` builds cosign 3, pinned in tests/cosign3/go.mod, whose
# `cosign sign` stores a sigstore bundle as an OCI referrer.
#
# The binary goes to target/cosign-bin/<cosign-version>/cosign; the last line
# printed on stdout is its path (tests/go-tool.sh says how it is cached).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../go-tool.sh
source "$here/../go-tool.sh"
case "${1:-2}" in
  2) major=v2 dir="$here" ;;
  3) major=v3 dir="$here/../cosign3" ;;
  *)
    echo "build.sh: cosign major version ${1} is not built here (2 or 3)" >&2
    exit 2
    ;;
esac
go_tool_build cosign "github.com/sigstore/cosign/$major" \
  "github.com/sigstore/cosign/$major/cmd/cosign" \
  sigs.k8s.io/release-utils/version.gitVersion "$dir"
