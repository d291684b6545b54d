#!/usr/bin/env bash
# release.sh: builds a release into _output/release, without Docker or a
# registry (`make release VERSION=v0.2.0`; docs/development/release.md):
#   etcd-operator-image-<VERSION>.oci.tar   the operator image for linux/amd64 and
#                                           linux/arm64: one OCI layout whose index.json
#                                           names one image index by the tag
#   etcd-operator-<CHART_VERSION>.tgz       the Helm chart, appVersion VERSION
#   kubectl-etcd_<VERSION>_<os>_<arch>.tar.gz (.zip for windows)
#                                           the kubectl plugin with LICENSE
#   SHA256SUMS                              over every file above
#
# It refuses to start when CHANGELOG.md has no entry for VERSION (see
# changelog_has_entry).
#
# Environment: VERSION (default from git, hack/version.sh), CHART_VERSION
# (default VERSION without its "v"), IMAGE_REPO (default openetcd/etcd-operator),
# GIT_SHA (default the commit, -dirty with uncommitted changes),
# SOURCE_DATE_EPOCH (the time stamped into the image and the archives; default
# the commit's, so that a rebuild of a commit gives the same files).
set -euo pipefail

log() { printf '[release] %s\n' "$*" >&2; }
die() {
	log "ERROR: $*"
	exit 1
}

# The plugin's platforms; the image's are build-image.sh's ARCHS below.
PLUGIN_PLATFORMS=(linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64)

# is_development_version VERSION: whether VERSION is one git describe makes
# between tags or before the first (hack/version.sh): such a build may ship
# under the changelog's "Unreleased" entry. A tag, or a version about to be
# tagged, is not one.
is_development_version() {
	local version=$1
	if git rev-parse -q --verify "refs/tags/$version" >/dev/null 2>&1; then
		return 1
	fi
	[[ $version =~ -[0-9]+-g[0-9a-f]+(-dirty)?$ || $version == *-dirty || $version == v0.0.0-* ]]
}

# changelog_has_entry VERSION FILE: whether FILE has a heading for VERSION,
# "## [0.2.0]" or "## [v0.2.0]" (Keep a Changelog, a date may follow), or, for
# a development version, "## [Unreleased]".
changelog_has_entry() {
	local version=$1 file=$2 bare=${1#v}
	[[ -f $file ]] || return 1
	if awk -v a="## [$bare]" -v b="## [v$bare]" 'index($0, a) == 1 || index($0, b) == 1 { found = 1 } END { exit !found }' "$file"; then
		return 0
	fi
	is_development_version "$version" && grep -q '^## \[Unreleased\]' "$file"
}

# archive_plugin DIR OUT: DIR's files, at the archive's top level, as a
# gzipped tarball or (OUT ending in .zip) a zip, owned by root and dated
# SOURCE_DATE_EPOCH.
archive_plugin() {
	local dir=$1 out=$2
	find "$dir" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
	if [[ $out == *.zip ]]; then
		(cd "$dir" && TZ=UTC zip -q -X -r "$out" .)
	else
		# The files by name, not ".": the archive unpacks to LICENSE and the
		# binary, without "./" before them.
		# shellcheck disable=SC2046 # the names are ours, without spaces
		tar -C "$dir" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
			--format=gnu -cf - $(cd "$dir" && ls -A) | gzip -n -9 >"$out"
	fi
}

main() {
	REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	cd "$REPO_ROOT"
	VERSION=${VERSION:-$(bash hack/version.sh)}
	CHART_VERSION=${CHART_VERSION:-${VERSION#v}}
	# The chart names its image by appVersion, so both carry the image's tag.
	IMAGE_TAG=v${VERSION#v}
	IMAGE_REPO=${IMAGE_REPO:-openetcd/etcd-operator}
	if [[ -z ${GIT_SHA:-} ]]; then
		GIT_SHA=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
		if [[ $GIT_SHA != unknown && -n $(git status --porcelain --untracked-files=no 2>/dev/null) ]]; then
			GIT_SHA=$GIT_SHA-dirty
		fi
	fi
	export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
	local ldflags="-s -w -X github.com/openetcd/etcd-operator/pkg/operatorrun.Version=$VERSION -X github.com/openetcd/etcd-operator/pkg/operatorrun.GitSHA=$GIT_SHA"

	if ! changelog_has_entry "$VERSION" CHANGELOG.md; then
		if is_development_version "$VERSION"; then
			die "CHANGELOG.md has no entry for $VERSION: add '## [${VERSION#v}] - $(date -u +%F)' or, for a development build, '## [Unreleased]'"
		fi
		die "CHANGELOG.md has no entry for $VERSION: add '## [${VERSION#v}] - $(date -u +%F)' with what changed (Keep a Changelog: Added, Changed, Fixed, Security)"
	fi

	local out=$REPO_ROOT/_output/release
	rm -rf "$out"
	mkdir -p "$out"
	# Not local: the EXIT trap runs after main returns.
	work=$(mktemp -d "$REPO_ROOT/_output/release-build.XXXXXX")
	trap 'rm -rf "$work"' EXIT
	log "$VERSION ($GIT_SHA), chart $CHART_VERSION, image $IMAGE_REPO:$IMAGE_TAG, into $out"

	local helm
	helm=$(bash hack/tools.sh helm)
	log "helm lint --strict example/chart"
	"$helm" lint --strict example/chart >&2
	"$helm" package example/chart --version "$CHART_VERSION" --app-version "$IMAGE_TAG" --destination "$out" >&2

	local platform goos goarch dir bin archive
	for platform in "${PLUGIN_PLATFORMS[@]}"; do
		goos=${platform%/*} goarch=${platform#*/}
		dir=$work/kubectl-etcd/${goos}_$goarch
		bin=kubectl-etcd
		[[ $goos == windows ]] && bin=kubectl-etcd.exe
		mkdir -p "$dir"
		log "kubectl-etcd for $platform"
		CGO_ENABLED=0 GOOS=$goos GOARCH=$goarch go build -trimpath -ldflags "$ldflags" -o "$dir/$bin" ./cmd/kubectl-etcd
		if [[ $goos == "$(go env GOHOSTOS)" && $goarch == "$(go env GOHOSTARCH)" ]]; then
			# A broken -X path would otherwise ship a plugin that says the wrong version.
			local stamp
			stamp=$("$dir/$bin" --version 2>&1 || true)
			[[ $stamp == *"$VERSION"* && $stamp == *"$GIT_SHA"* ]] ||
				die "kubectl-etcd --version says '$stamp', want $VERSION and $GIT_SHA"
		fi
		install -m 0644 LICENSE "$dir/LICENSE"
		archive=$out/kubectl-etcd_${VERSION}_${goos}_$goarch.tar.gz
		[[ $goos == windows ]] && archive=${archive%.tar.gz}.zip
		archive_plugin "$dir" "$archive"
	done

	log "the image for linux/amd64 and linux/arm64"
	ARCHS="amd64 arm64" VERSION=$VERSION GIT_SHA=$GIT_SHA IMAGE=$IMAGE_REPO:$IMAGE_TAG OUT_DIR=$work OUT='' \
		bash hack/build-image.sh
	go build -o "$work/imagebuild" ./hack/imagebuild
	"$work/imagebuild" index -tag "$IMAGE_REPO:$IMAGE_TAG" -o "$out/etcd-operator-image-$VERSION.oci.tar" \
		"$work/etcd-operator-image-amd64.tar" "$work/etcd-operator-image-arm64.tar" >&2

	(cd "$out" && find . -maxdepth 1 -type f ! -name SHA256SUMS -printf '%f\n' | LC_ALL=C sort | xargs sha256sum -- >SHA256SUMS)
	log "done:"
	(cd "$out" && ls -l) >&2
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	main "$@"
fi
