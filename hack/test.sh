#!/usr/bin/env bash
# `make test`: what CI runs. Prints a timing line per phase.
#   1. gofmt, go vet, generated code up to date;
#   2. unit tests with the race detector;
#   3. the end-to-end suite on the local Kubernetes (hack/e2e.sh starts it, or
#      reuses a healthy one, and imports the image built from this tree; root);
#   4. two nodes added to the local cluster (up.sh NODES=3) and the node events
#      (^TestNodes: members spread, a node stopped) run there;
#   5. the local cluster is brought down again, whatever the suites' outcome.
set -o errexit -o nounset -o pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# phase NAME CMD...: runs CMD with a timing line and returns CMD's status (the
# timing line must not turn a failure into success).
phase() {
    local name=$1; shift
    local start=$SECONDS status=0
    echo "=== [make test] $name"
    "$@" || status=$?
    echo "=== [make test] $name: $((SECONDS - start))s"
    return "$status"
}

# The one-node suite runs first: on a cluster that already has three nodes,
# hack/e2e.sh would run the node events only.
bash hack/local-cluster/one-node.sh "make test" "sudo make test"

phase "verify (gofmt, go vet, codegen)" make --no-print-directory verify
phase "unit tests" make --no-print-directory unit

e2e_status=0
phase "end-to-end suite (local cluster up, build and import the image, go test -tags e2e)" bash hack/e2e.sh || e2e_status=$?
if [ "$e2e_status" -eq 0 ]; then
    phase "two more nodes (up.sh NODES=3)" env NODES=3 bash hack/local-cluster/up.sh || e2e_status=$?
fi
if [ "$e2e_status" -eq 0 ]; then
    phase "node events on three nodes (go test -tags e2e -run ^TestNodes)" env E2E_SKIP_BUILD=1 bash hack/e2e.sh || e2e_status=$?
fi
phase "local cluster down" bash hack/local-cluster/down.sh || true
if [ "$e2e_status" -ne 0 ]; then
    echo "=== [make test] the end-to-end suite failed (exit $e2e_status); see _output/e2e/ for logs and dumps"
    exit "$e2e_status"
fi
