#!/usr/bin/env bash
# Regenerates deepcopy functions, the typed clientset (with its fake), listers and
# informers under pkg/generated, and the CRD manifests under example/crd and
# example/chart/files/crds.
# Run it after changing anything in pkg/apis.
set -o errexit -o nounset -o pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
module=$(cd "$root" && go list -m)
# `go list -m` leaves .Dir empty for a module not yet in the module cache (a
# fresh machine); download it first.
(cd "$root" && go mod download k8s.io/code-generator)
codegen_dir=$(cd "$root" && go list -m -f '{{.Dir}}' k8s.io/code-generator)
if [[ -z $codegen_dir || ! -f $codegen_dir/kube_codegen.sh ]]; then
	echo "update-codegen: k8s.io/code-generator not found in the module cache (dir '${codegen_dir}')" >&2
	exit 1
fi
# kube_codegen.sh installs its generators with `go install`; keep them out of the
# user's GOBIN and reuse them between runs.
export GOBIN="${GOBIN:-${XDG_CACHE_HOME:-$HOME/.cache}/etcd-operator/codegen-bin}"
mkdir -p "$GOBIN"

# shellcheck source=/dev/null
source "${codegen_dir}/kube_codegen.sh"

out_root=${CODEGEN_OUTPUT_ROOT:-$root}

kube::codegen::gen_helpers \
    --boilerplate "${root}/hack/boilerplate.go.txt" \
    "${root}/pkg/apis"

kube::codegen::gen_client \
    --with-watch \
    --output-dir "${out_root}/pkg/generated" \
    --output-pkg "${module}/pkg/generated" \
    --boilerplate "${root}/hack/boilerplate.go.txt" \
    "${root}/pkg/apis"

# The CRD YAML files are written from the same Go definitions the operators install
# with --create-crd=true, so the two install paths cannot drift apart.
# The Helm chart carries its own copy (Helm reads only files inside the chart).
# The schema's descriptions (kubectl explain) are the API types' doc comments,
# extracted first into Go so that the operators carry them too.
(cd "$root" && go run ./hack/gen-crds -fielddocs "${out_root}/pkg/crds/zz_generated.fielddocs.go")
(cd "$root" && go run ./hack/gen-crds -o "${out_root}/example/crd")
(cd "$root" && go run ./hack/gen-crds -o "${out_root}/example/chart/files/crds")
