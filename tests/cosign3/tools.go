//go:build tools

// Package tools pins the cosign command's module in go.mod, so that
// `go build github.com/sigstore/cosign/v3/cmd/cosign` in this module builds
// exactly it.
package tools

import _ "github.com/sigstore/cosign/v3/cmd/cosign"
