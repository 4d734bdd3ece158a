# Sourced by the build scripts of single-binary test tools built from an
# upstream Go module (tests/helm/build.sh, tests/cosign/build.sh). Test
# tooling only: nothing here is part of the product.
#
# go_tool_build NAME MODULE PACKAGE LDFLAGS_VERSION_VAR [MODULE_DIR] builds
# PACKAGE of MODULE, at the version the go.mod of MODULE_DIR (by default the
# calling script's directory) requires, into target/NAME-bin/<version>/NAME
# at the repository root, with `-X LDFLAGS_VERSION_VAR=<version>`. The
# binary is reused while it is there and was built from the same inputs
# (go.mod, go.sum, tools.go, flags); one build runs at a time, whoever asks.
# The last line printed on stdout is its path; progress goes to stderr.
# Needs Go and, the first time, the Go module proxy (or a module cache
# holding the modules in go.sum). GO=/path/to/go picks the toolchain.
go_tool_build() {
  local name="$1" module="$2" package="$3" version_var="$4"
  local here root version out goflags ldflags want
  here="$(cd "${5:-$(dirname "${BASH_SOURCE[1]}")}" && pwd)"
  root="$(cd "$here/../.." && pwd)"
  version="$(awk -v m="$module" '($1 == "require" && $2 == m) { print $3 }' "$here/go.mod" | head -n 1)"
  if [[ -z "$version" ]]; then
    echo "build.sh: cannot read the $name version from tests/$(basename "$here")/go.mod" >&2
    exit 1
  fi
  out="$root/target/$name-bin/$version"
  goflags="-mod=readonly -trimpath -buildvcs=false"
  ldflags="-s -w -X $version_var=$version"
  want="$( (cd "$here" && cat go.mod go.sum tools.go && printf '%s\n' "$goflags" "$ldflags") | sha256sum | cut -d' ' -f1)"

  built() { [[ -x "$out/$name" && -f "$out/.inputs" && "$(cat "$out/.inputs")" == "$want" ]]; }
  if built; then
    echo "$out/$name"
    return 0
  fi

  # shellcheck source=go-toolchain.sh
  source "$here/../go-toolchain.sh"

  mkdir -p "$out"
  exec 9> "$out/.lock"
  flock 9
  if built; then
    echo "$out/$name"
    return 0
  fi
  echo "build.sh: building $name $version into $out" >&2
  local start nice=()
  start=$(date +%s)
  if command -v nice > /dev/null 2>&1; then nice=(nice -n 10); fi
  (
    cd "$here"
    CGO_ENABLED=0 GOFLAGS="$goflags" GOTOOLCHAIN=local \
      "${nice[@]}" "$go_cmd" build -ldflags "$ldflags" -o "$out/$name.tmp" "$package"
  )
  mv "$out/$name.tmp" "$out/$name"
  echo "$want" > "$out/.inputs"
  echo "build.sh: $name built in $(($(date +%s) - start)) s" >&2
  echo "$out/$name"
}
