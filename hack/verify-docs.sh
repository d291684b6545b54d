#!/usr/bin/env bash
# Fails when a generated documentation page differs from what `make docs`
# would write now: the reference pages from the code (hack/gen-docs reference),
# the results pages from their committed data, docs/results/data (hack/gen-docs
# results -check names each page that differs), or when a link of the docs does not
# resolve: relative links and #anchors of every markdown page, and every
# page#anchor named in code, scripts, the chart and example/ (runbook_urls,
# error messages).
set -o errexit -o nounset -o pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

go run ./hack/gen-docs reference -o "$tmp"
status=0
for page in api.md events.md; do
	if ! diff -u "docs/reference/$page" "$tmp/$page"; then
		status=1
	fi
done
if [ "$status" -ne 0 ]; then
	echo "docs/reference is out of date: run make docs" >&2
fi
if ! go run ./hack/gen-docs results -check; then
	status=1
fi
if ! go run ./hack/gen-docs links -root "$root"; then
	status=1
fi
if [ "$status" -eq 0 ]; then
	echo "generated docs are up to date and every link resolves"
fi
exit "$status"
