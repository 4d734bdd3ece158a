#!/usr/bin/env bash
# Build helm from the upstream Go module pinned in tests/helm/go.mod, for the
# tests of the chart in deploy/chart. Test tooling only: nothing here is part
# of the product.
#
# The binary goes to target/helm-bin/<helm-version>/helm; the last line
# printed on stdout is its path (tests/go-tool.sh says how it is cached).
set -euo pipefail
# shellcheck source=../go-tool.sh
source "$(dirname "${BASH_SOURCE[0]}")/../go-tool.sh"
go_tool_build helm helm.sh/helm/v3 helm.sh/helm/v3/cmd/helm \
  helm.sh/helm/v3/internal/version.version
