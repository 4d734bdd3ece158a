#!/usr/bin/env bash
# Build cosign from the upstream Go module pinned in tests/cosign/go.mod, for
# the signature interoperability tests (`radwasm policy sign/verify`,
# ReconcilePolicy spec.verify). Test tooling only: nothing here is part of
# the product. The tests run it fully offline (no Rekor, no Fulcio, a
# loopback registry, HOME and COSIGN_* in a temporary directory).
#
# The binary goes to target/cosign-bin/<cosign-version>/cosign; the last line
# printed on stdout is its path (tests/go-tool.sh says how it is cached).
set -euo pipefail
# shellcheck source=../go-tool.sh
source "$(dirname "${BASH_SOURCE[0]}")/../go-tool.sh"
go_tool_build cosign github.com/sigstore/cosign/v2 \
  github.com/sigstore/cosign/v2/cmd/cosign \
  sigs.k8s.io/release-utils/version.gitVersion
