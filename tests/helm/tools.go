//go:build tools

// Package tools pins the helm command's module in go.mod, so that
// `go build helm.sh/helm/v3/cmd/helm` in this module builds exactly it.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
