#!/usr/bin/env bash
# Fails when the generated code or CRD manifests differ from what
# hack/update-codegen.sh would write now.
set -o errexit -o nounset -o pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Regenerate into a copy of the tree so the working copy is never touched.
mkdir -p "$tmp/tree"
(cd "$root" && tar --exclude=./_output --exclude=./.git -cf - .) | tar -C "$tmp/tree" -xf -
(cd "$tmp/tree" && CODEGEN_OUTPUT_ROOT="$tmp/tree" bash hack/update-codegen.sh >/dev/null)

status=0
for dir in pkg/apis pkg/generated pkg/crds example/crd example/chart/files/crds; do
    if ! diff -Nru "$root/$dir" "$tmp/tree/$dir"; then
        status=1
    fi
done
if [ "$status" -ne 0 ]; then
    echo "generated code is out of date: run hack/update-codegen.sh" >&2
    exit 1
fi
echo "generated code is up to date"
