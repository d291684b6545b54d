# shellcheck shell=bash
# addon.sh: the helpers of the scripts that build and run other projects'
# software beside this operator on the local cluster (hack/original: the
# original operator; hack/cert-manager: cert-manager). Sourced after lib.sh
# (log, die, TOOLS_DIR, REPO_ROOT, ENV_FILE), never run.

# step TEXT: say which step runs, for a first run that is read as it goes.
step() { printf '\n[%s] ==== %s\n' "$LOG_TAG" "$*" >&2; }

# kc ARGS...: kubectl against the local cluster, the command line printed first.
kc() {
	log "+ kubectl $*"
	"$KUBECTL" "$@"
}

# use_local_cluster: KUBECONFIG and KUBECTL as the environment gave them
# (ENV_KUBECONFIG, ENV_KUBECTL, saved before lib.sh set KUBECTL), else from the
# local cluster's env file; and the API answering.
use_local_cluster() {
	if [[ -n ${ENV_KUBECONFIG:-} && -n ${ENV_KUBECTL:-} ]]; then
		KUBECONFIG=$ENV_KUBECONFIG KUBECTL=$ENV_KUBECTL
	else
		[[ -f $ENV_FILE ]] || die "$ENV_FILE not found: start the local cluster (make local-up), or set KUBECONFIG and KUBECTL"
		# shellcheck source=/dev/null
		source "$ENV_FILE"
	fi
	export KUBECONFIG
	[[ -x $KUBECTL ]] || die "KUBECTL=$KUBECTL is not an executable"
	"$KUBECTL" get --raw /readyz >/dev/null || die "the API server of $KUBECONFIG does not answer"
}

# stamp FILE...: a digest of the files and of the Go toolchain, which a
# build records beside what it made, to build nothing when they are the same.
stamp() { { cat "$@"; go version; } | sha256sum | cut -d' ' -f1; }

# ensure_tool NAME PKG: the repository helper PKG as $TOOLS_DIR/NAME, built
# the way hack/local-cluster/build.sh builds it when it is not there yet.
ensure_tool() {
	local name=$1 pkg=$2
	[[ -x $TOOLS_DIR/$name ]] && return 0
	log "building $pkg into $TOOLS_DIR"
	mkdir -p "$TOOLS_DIR"
	(cd "$REPO_ROOT" && CGO_ENABLED=0 GOWORK=off go build -trimpath -ldflags "-s -w" -o "$TOOLS_DIR/$name" "./$pkg")
}
