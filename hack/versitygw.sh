#!/usr/bin/env bash
# versitygw.sh: builds versitygw, an S3 server, from the Go module proxy into the
# local tool cache (where the e2e suite builds it too) and prints its path. A
# built version costs nothing. `make unit` hands the path to the S3 store tests
# as VERSITYGW.
set -o errexit -o nounset -o pipefail

VERSITYGW_VERSION=${VERSITYGW_VERSION:-v1.8.0}
dir=${XDG_CACHE_HOME:-$HOME/.cache}/etcd-operator-local/bin/versitygw-$VERSITYGW_VERSION
if [[ ! -x $dir/versitygw ]]; then
	(cd /tmp && GOBIN=$dir CGO_ENABLED=0 go install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION") >&2
fi
echo "$dir/versitygw"
