# shellcheck shell=bash
# build.sh: builds the cluster's binaries from the Go module proxy, sourced
# by up.sh. Every component is built in a throwaway module under
# $CACHE_DIR/src (never inside the repository) and its binaries land in
# $BIN_CACHE/<component>-<version>/ together with a ".complete" marker; a
# directory with the marker is never rebuilt.
#
# Each build runs as "( ... ) & wait $! || die": a subshell written as
# "( ... ) || die" would run with errexit silently disabled (bash ignores
# set -e inside anything whose status is tested), so a failed step would not
# stop it.

# Environment for builds in throwaway modules: static binaries, the local Go
# toolchain only, no go.work from a parent directory, go.mod may be updated.
go_throwaway() {
	env CGO_ENABLED=0 GOTOOLCHAIN=local GOWORK=off GOFLAGS="-mod=mod -buildvcs=false" go "$@"
}

# module_exists MODULE@VERSION: fail with the proxy's answer if the version
# is not available (some patch versions are refused by the proxy).
module_exists() {
	local out
	if ! out=$(cd / && env GOWORK=off GOFLAGS='' go mod download -json "$1" 2>&1) ||
		grep -q '"Error"' <<<"$out"; then
		log "$1 is not available from the Go module proxy:"
		printf '%s\n' "$out" | grep -E '"Error"|go:' >&2 || true
		return 1
	fi
}

# finish_build DIR: mark a freshly built $DIR.tmp as complete and move it to DIR.
finish_build() {
	touch "$1.tmp/.complete"
	rm -rf "$1"
	mv "$1.tmp" "$1"
}

# ---------------------------------------------------------------------------
# Kubernetes: k8s.io/kubernetes cannot be built with "go install pkg@v"
# because its go.mod points the k8s.io/* staging modules at ./staging. A
# module that requires k8s.io/kubernetes and replaces each staging module by
# its published v0.X.Y version builds fine.
# ---------------------------------------------------------------------------
K8S_COMMANDS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)

build_kubernetes() {
	local out=$K8S_BIN src=$CACHE_DIR/src/kubernetes-$K8S_VERSION
	local staging_version=v0.${K8S_VERSION#v1.} # v1.32.2 -> v0.32.2
	[[ -f $out/.complete ]] && return 0
	log "building Kubernetes $K8S_VERSION (several minutes the first time; log: $LOG_DIR/build-kubernetes.log)"
	local t0=$SECONDS
	(
		exec >>"$LOG_DIR/build-kubernetes.log" 2>&1
		module_exists "k8s.io/kubernetes@$K8S_VERSION"
		local gomod staging m
		gomod=$(cd / && GOWORK=off GOFLAGS='' go list -m -f '{{.GoMod}}' "k8s.io/kubernetes@$K8S_VERSION")
		staging=$(sed -n 's#^[[:space:]]*\(k8s\.io/[^[:space:]]*\) => \./staging/.*#\1#p' "$gomod")
		[[ -n $staging ]] || die "no staging replace directives found in $gomod"

		rm -rf "$src" && mkdir -p "$src"
		{
			printf 'module local.invalid/kubernetes-build\n\ngo 1.23.0\n\n'
			printf 'require k8s.io/kubernetes %s\n\nreplace (\n' "$K8S_VERSION"
			for m in $staging; do printf '\t%s => %s %s\n' "$m" "$m" "$staging_version"; done
			printf ')\n'
		} >"$src/go.mod"
		{
			printf '//go:build tools\n\npackage tools\n\nimport (\n'
			for m in "${K8S_COMMANDS[@]}"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$m"; done
			printf ')\n'
		} >"$src/tools.go"
		cd "$src" || exit
		go_throwaway mod tidy -e

		# Without these the binaries report v0.0.0 and nodes show that version.
		local ldflags="-s -w" pkg
		for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
			ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1"
			ldflags+=" -X $pkg.gitMinor=$(cut -d. -f2 <<<"$K8S_VERSION") -X $pkg.gitTreeState=clean"
			ldflags+=" -X $pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
		done
		rm -rf "$out.tmp" && mkdir -p "$out.tmp"
		go_throwaway build -trimpath -ldflags "$ldflags" -o "$out.tmp/" \
			"${K8S_COMMANDS[@]/#/k8s.io/kubernetes/cmd/}"
		finish_build "$out"
	) &
	wait $! || die "Kubernetes build failed; see $LOG_DIR/build-kubernetes.log"
	log "build kubernetes: $((SECONDS - t0))s"
}

# ---------------------------------------------------------------------------
# CoreDNS: a plain "go install" works.
# ---------------------------------------------------------------------------
build_coredns() {
	local out=$COREDNS_BIN
	[[ -f $out/.complete ]] && return 0
	log "building CoreDNS $COREDNS_VERSION (log: $LOG_DIR/build-coredns.log)"
	local t0=$SECONDS
	(
		exec >>"$LOG_DIR/build-coredns.log" 2>&1
		rm -rf "$out.tmp" && mkdir -p "$out.tmp"
		cd /
		env CGO_ENABLED=0 GOTOOLCHAIN=local GOWORK=off GOFLAGS=-buildvcs=false GOBIN="$out.tmp" \
			go install -trimpath -ldflags "-s -w" "github.com/coredns/coredns@$COREDNS_VERSION"
		finish_build "$out"
	) &
	wait $! || die "CoreDNS build failed; see $LOG_DIR/build-coredns.log"
	log "build coredns: $((SECONDS - t0))s"
}

# ---------------------------------------------------------------------------
# etcd 3.5+/3.6: server, etcdctl and etcdutl are separate modules whose
# go.mod files use replace directives, so "go install ...@v" is refused; a
# throwaway module requiring all three builds them. The server's main package
# is named "server": it is renamed to etcd.
# ---------------------------------------------------------------------------
build_etcd() {
	local v=$1 out src=$CACHE_DIR/src/etcd-v$1 m
	out=$(etcd_bin_dir "$v")
	[[ -f $out/.complete ]] && return 0
	log "building etcd $v (log: $LOG_DIR/build-etcd-v$v.log)"
	local t0=$SECONDS
	local mods=(go.etcd.io/etcd/server/v3 go.etcd.io/etcd/etcdctl/v3 go.etcd.io/etcd/etcdutl/v3)
	(
		exec >>"$LOG_DIR/build-etcd-v$v.log" 2>&1
		for m in "${mods[@]}"; do module_exists "$m@v$v"; done
		rm -rf "$src" && mkdir -p "$src"
		{
			printf 'module local.invalid/etcd-build\n\ngo 1.23.0\n\nrequire (\n'
			for m in "${mods[@]}"; do printf '\t%s v%s\n' "$m" "$v"; done
			printf ')\n'
		} >"$src/go.mod"
		{
			printf '//go:build tools\n\npackage tools\n\nimport (\n'
			for m in "${mods[@]}"; do printf '\t_ "%s"\n' "$m"; done
			printf ')\n'
		} >"$src/tools.go"
		cd "$src" || exit
		go_throwaway mod tidy -e
		rm -rf "$out.tmp" && mkdir -p "$out.tmp"
		go_throwaway build -trimpath -ldflags "-s -w" -o "$out.tmp/" "${mods[@]}"
		mv "$out.tmp/server" "$out.tmp/etcd"
		local reported
		reported=$("$out.tmp/etcd" --version) # not piped into grep -q: SIGPIPE + pipefail
		[[ $reported == *"etcd Version: $v"* ]] || die "built etcd reports '$reported', not $v"
		finish_build "$out"
	) &
	wait $! || die "etcd $v build failed; see $LOG_DIR/build-etcd-v$v.log"
	log "build etcd $v: $((SECONDS - t0))s"
}

# ---------------------------------------------------------------------------
# etcd 3.4: the proxy has no usable 3.4 server module, Debian bookworm ships
# 3.4.23. Its binaries are copied into the cache like the built ones; if they
# are dynamically linked, the image build copies their libraries too.
# ---------------------------------------------------------------------------
collect_debian_etcd() {
	local v=$ETCD_DEBIAN_VERSION out have
	out=$(etcd_bin_dir "$v")
	[[ -f $out/.complete ]] && return 0
	have=$(dpkg-query -W -f='${Version}' etcd-server 2>/dev/null || true)
	[[ $have == "$v"* ]] || die "Debian etcd-server is '$have', expected $v"
	rm -rf "$out.tmp" && mkdir -p "$out.tmp"
	cp /usr/bin/etcd /usr/bin/etcdctl "$out.tmp/"
	finish_build "$out"
}

# Small helpers from this repository (standard library or main module only):
# built every time (seconds with a warm cache) so changes are picked up, but
# a previous binary is kept and used if the main module does not build right
# now (other people may be editing go.mod).
build_repo_tools() {
	mkdir -p "$TOOLS_DIR"
	local t bin
	for t in hack/imagebuild hack/local-cluster/pause hack/local-cluster/nslookup; do
		bin=$TOOLS_DIR/${t##*/}
		if ! (cd "$REPO_ROOT" && CGO_ENABLED=0 GOWORK=off go build -trimpath -ldflags "-s -w" -o "$bin.new" "./$t") \
			>>"$LOG_DIR/build-tools.log" 2>&1; then
			[[ -x $bin ]] || die "cannot build ./$t (see $LOG_DIR/build-tools.log)"
			warn "cannot build ./$t now, using the previous binary (see $LOG_DIR/build-tools.log)"
			continue
		fi
		mv "$bin.new" "$bin"
	done
}

# build_all: everything above. Kubernetes (the longest build) runs in the
# background while CoreDNS and etcd build one after the other: this machine
# has 2 cores and each "go build" already uses both, but overlapping the two
# chains hides module download time.
build_all() {
	local k8s_job chain_job rc=0 v
	build_repo_tools
	collect_debian_etcd
	build_kubernetes &
	k8s_job=$!
	(
		build_coredns
		for v in "${ETCD_BUILT_VERSIONS[@]}"; do build_etcd "$v"; done
	) &
	chain_job=$!
	wait "$k8s_job" || rc=1
	wait "$chain_job" || rc=1
	((rc == 0)) || die "a build failed (logs: $LOG_DIR/build-*.log)"
}
