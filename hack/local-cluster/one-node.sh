#!/usr/bin/env bash
# one-node.sh WHAT RETRY: refuses (exit 1) when the local cluster runs more than
# one node. `make test` and `make chaos` run their one-node suites first and add
# the other nodes themselves; on a cluster that already runs several, hack/e2e.sh
# would run only the node events (^TestNodes) and the one-node suite would be
# skipped without a failure. The nodes counted are those whose kubelet runs now,
# not those the env file last recorded: a cluster brought down keeps its list.
# WHAT names the caller in the message, RETRY is the command that runs it again.
# shellcheck source-path=SCRIPTDIR disable=SC2034 # LOG_TAG is read by lib.sh
set -o errexit -o nounset -o pipefail
what=${1:?what is refusing}
retry=${2:?the command to run it again}
LOG_TAG=$what
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=nodes.sh
source "$(dirname "${BASH_SOURCE[0]}")/nodes.sh"
nodes=$(running_node_count)
if ((nodes > 1)); then
	echo "[$what] the local cluster runs ${nodes} nodes; $what starts on one and adds the others itself:" >&2
	echo "[$what]   sudo make local-down && sudo make local-up && $retry" >&2
	exit 1
fi
