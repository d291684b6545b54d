#!/usr/bin/env bash
# etcd-binaries.sh [VERSION...]: builds the etcd releases that unit tests run
# as processes (default: the 3.6 the local cluster uses) from the Go module
# proxy, into the local cluster's binary cache, where
# hack/local-cluster/up.sh finds them already built (and the other way
# round). A release already there costs nothing. `make unit` runs it first.
#
# Why processes: the unit tests embed etcd 3.5 (the operator's etcd module),
# and one Go module cannot hold two etcd server versions; the downgrade API
# only works on a 3.6 cluster.
# shellcheck source-path=SCRIPTDIR disable=SC2034 # LOG_TAG, LOG_DIR are read by lib.sh/build.sh
set -o errexit -o nounset -o pipefail

LOG_TAG=etcd-binaries
# shellcheck source=local-cluster/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/local-cluster/lib.sh"
# shellcheck source=local-cluster/build.sh
source "$LC_DIR/build.sh"
LOG_DIR=$REPO_ROOT/_output/logs
mkdir -p "$LOG_DIR"

versions=("$@")
if ((${#versions[@]} == 0)); then
	versions=("$ETCD_36")
fi
for v in "${versions[@]}"; do
	build_etcd "$v"
	echo "$(etcd_bin_dir "$v")"
done
