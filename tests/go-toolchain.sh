# Sourced by the test tools' build scripts (tests/kube/build.sh,
# tests/node/build.sh, tests/go-tool.sh): sets go_cmd to the Go toolchain to build with, or
# exits. GO=/path/to/go picks it; otherwise `go` on PATH, then
# /usr/local/go/bin/go.
go_cmd="${GO:-}"
if [[ -z "$go_cmd" ]]; then
  if command -v go > /dev/null 2>&1; then
    go_cmd=go
  elif [[ -x /usr/local/go/bin/go ]]; then
    go_cmd=/usr/local/go/bin/go
  else
    echo "$(basename "$0"): no Go toolchain (set GO=/path/to/go or put go on PATH)" >&2
    exit 1
  fi
fi
