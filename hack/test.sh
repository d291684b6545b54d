#!/usr/bin/env bash
# `make test`: what CI runs. Prints a timing line per phase.
set -o errexit -o nounset -o pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

phase() {
    local name=$1; shift
    local start=$SECONDS
    echo "=== [make test] $name"
    "$@"
    echo "=== [make test] $name: $((SECONDS - start))s"
}

phase "verify (gofmt, go vet, codegen)" make --no-print-directory verify
phase "unit tests" make --no-print-directory unit
