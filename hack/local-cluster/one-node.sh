#!/usr/bin/env bash
# one-node.sh WHAT RETRY: refuses (exit 1) when the local cluster runs more than
# one node. `make test` and `make chaos` run their one-node suites first and add
# the other nodes themselves; on a cluster that already has several, hack/e2e.sh
# would run only the node events (^TestNodes) and the one-node suite would be
# skipped without a failure. WHAT names the caller in the message, RETRY is the
# command that runs it again.
set -o errexit -o nounset -o pipefail
what=${1:?what is refusing}
retry=${2:?the command to run it again}
env_file=${LOCAL_CLUSTER_STATE_DIR:-/var/lib/etcd-operator-local}/env
nodes=$(sed -n "s/^export LOCAL_CLUSTER_NODES=//p" "$env_file" 2>/dev/null | tail -1 || true)
if ((${nodes:-1} > 1)); then
	echo "[$what] the local cluster runs ${nodes} nodes; $what starts on one and adds the others itself:" >&2
	echo "[$what]   sudo make local-down && sudo make local-up && $retry" >&2
	exit 1
fi
