#!/usr/bin/env bash
# tools.sh TOOL...: builds the pinned test tools from the Go module proxy into a
# cache outside the tree and prints the path of each binary; a version already
# built costs nothing. `make unit` runs it and hands the paths to the tests
# (PROMTOOL, HELM, ETCD_BENCHMARK).
#   promtool:  `promtool check/test rules` on example/monitoring
#   helm:      `helm lint` and `helm template` on example/chart
#   benchmark: etcd's own benchmark tool (tools/benchmark), which `make bench`
#              (BENCH_ONLY=etcd) runs against the operator's cluster and the floor
set -o errexit -o nounset -o pipefail

PROMTOOL_MODULE=github.com/prometheus/prometheus/cmd/promtool
PROMTOOL_VERSION=v0.316.0 # Prometheus 3.16
HELM_MODULE=helm.sh/helm/v3/cmd/helm
HELM_VERSION=v3.22.0
# Helm's release builds stamp the Kubernetes version that helm template and helm
# lint assume (1.<client-go minor>; helm v3.22.0 has client-go v0.37.0); without
# it they assume 1.20, older than the chart's kubeVersion allows.
HELM_LDFLAGS="-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=37
 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=37
 -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"

# etcd's benchmark tool lives in etcd's root module (go.etcd.io/etcd/tools/v3
# is the module of etcd's development tools, not this one), of the etcd the
# bench's clusters run (test/e2e/bench_etcd_test.go).
BENCHMARK_MODULE=go.etcd.io/etcd/v3
BENCHMARK_VERSION=v3.5.21

cache=${TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/etcd-operator/tools}

# build NAME MODULE VERSION [TAGS [LDFLAGS [DIR-SUFFIX]]]; a build with other
# ldflags goes to a directory of its own (DIR-SUFFIX), so a cached one is not reused.
build() {
	local name=$1 module=$2 version=$3 tags=${4:-} ldflags=${5:-} suffix=${6:-}
	local dir=$cache/$name-$version$suffix
	if [[ ! -x $dir/$name ]]; then
		mkdir -p "$dir"
		echo "tools.sh: building $name $version from the Go module proxy (once; minutes)" >&2
		# Outside the repo's module, so that the tool's dependencies are its own.
		(cd "$dir" && GOBIN=$dir CGO_ENABLED=0 go install -tags "$tags" -ldflags "$ldflags" "$module@$version") >&2
	fi
	echo "$dir/$name"
}

# build_benchmark: etcd's go.mod points etcd's other modules at its own tree
# with replace directives, so "go install pkg@version" is refused; a throwaway
# module that requires it builds it, as hack/local-cluster/build.sh builds etcd.
build_benchmark() {
	local dir=$cache/benchmark-$BENCHMARK_VERSION
	if [[ ! -x $dir/benchmark ]]; then
		echo "tools.sh: building etcd's benchmark $BENCHMARK_VERSION from the Go module proxy (once; minutes)" >&2
		local src=$dir/src
		rm -rf "$src" && mkdir -p "$src"
		printf 'module local.invalid/etcd-benchmark-build\n\ngo 1.23.0\n\nrequire %s %s\n' \
			"$BENCHMARK_MODULE" "$BENCHMARK_VERSION" >"$src/go.mod"
		printf '//go:build tools\n\npackage tools\n\nimport _ "%s/tools/benchmark"\n' "$BENCHMARK_MODULE" >"$src/tools.go"
		(
			cd "$src"
			export CGO_ENABLED=0 GOTOOLCHAIN=local GOWORK=off GOFLAGS="-mod=mod -buildvcs=false"
			go mod tidy -e
			go build -trimpath -o "$dir/benchmark.new" "$BENCHMARK_MODULE/tools/benchmark"
		) >&2
		mv "$dir/benchmark.new" "$dir/benchmark"
	fi
	echo "$dir/benchmark"
}

if (($# == 0)); then
	set -- promtool helm benchmark
fi
for tool in "$@"; do
	case $tool in
	# remove_all_sd leaves out the service discovery plugins (the cloud SDKs),
	# which rule checks do not use: the build takes minutes instead of half an hour.
	promtool) build promtool "$PROMTOOL_MODULE" "$PROMTOOL_VERSION" remove_all_sd ;;
	helm) build helm "$HELM_MODULE" "$HELM_VERSION" "" "$HELM_LDFLAGS" -k8s1.37 ;;
	benchmark) build_benchmark ;;
	*)
		echo "tools.sh: unknown tool $tool (want promtool, helm or benchmark)" >&2
		exit 1
		;;
	esac
done
