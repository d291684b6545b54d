#!/usr/bin/env bash
# previous-release.sh [--load]: the previous release, as the upgrade test
# (make e2e-upgrade, test/e2e/upgrade_release_test.go) installs it before
# upgrading to this tree: its manifests and its image, made from the commit
# hack/previous-release records, never from the working tree.
#
#   1. checks that the commit is in this clone (a shallow clone lacks it:
#      `git fetch --unshallow`) and, where the release's tag exists, that the
#      tag names that commit;
#   2. extracts the commit's tree (`git archive <commit> | tar -x`) into
#      $CACHE_DIR/previous-release/<version>-<commit>/src: its example/ is
#      what the test installs (rbac/create_role.sh, deployment.yaml, the backup
#      and restore operators' deployment.yaml; each operator installs its own
#      CRD with --create-crd=true, as that release did);
#   3. builds that tree's image with that tree's own hack/build-image.sh (what
#      its `make image` runs), for this machine's architecture only, stamped
#      with the release's version and commit, and tagged
#      openetcd/etcd-operator:<version>-release: this tree's build keeps the tag
#      openetcd/etcd-operator:v0.1.0 the manifests name, and on the node the two
#      must not replace each other;
#   4. with --load, imports that image into the local cluster
#      (hack/local-cluster/load-image.sh; root).
#
# A commit's tree never changes, so the tree is extracted once, and the image
# is built again only when the commit, the Go toolchain, the CA bundle or this
# script changed (the first build takes minutes, like `make image`). Prints
# what the test reads, one key=value a line: version, commit, tree, image,
# tarball. Everything else goes to stderr.
# shellcheck source-path=SCRIPTDIR disable=SC2034 # LOG_TAG is read by lib.sh
set -euo pipefail

PREVIOUS_RELEASE_HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# release_commit_check DIR VERSION COMMIT: fails, saying what to do, unless
# COMMIT is a full sha in the history of the clone at DIR, its CHANGELOG.md
# names VERSION as its newest release (as `make release` wants of a release),
# and the tag VERSION, where it exists, names it.
release_commit_check() {
	local dir=$1 version=$2 commit=$3 tagged newest
	if ! [[ $commit =~ ^[0-9a-f]{40}$ ]]; then
		echo "the previous release's commit must be a full sha, not '$commit' (hack/previous-release)" >&2
		return 1
	fi
	if ! git -C "$dir" rev-parse --git-dir >/dev/null 2>&1; then
		echo "$dir is not a git clone: the previous release is built from its commit $commit; clone the repository" >&2
		return 1
	fi
	if ! git -C "$dir" cat-file -e "$commit^{commit}" 2>/dev/null; then
		if [[ $(git -C "$dir" rev-parse --is-shallow-repository) == true ]]; then
			echo "commit $commit of $version is not in this shallow clone: run git fetch --unshallow" >&2
		else
			echo "commit $commit of $version is not in this clone: fetch the history that holds it (git fetch origin)" >&2
		fi
		return 1
	fi
	newest=$(git -C "$dir" show "$commit:CHANGELOG.md" 2>/dev/null |
		sed -n 's/^## \[v\{0,1\}\([0-9][^]]*\)\].*/\1/p' | head -n 1)
	if [[ $newest != "${version#v}" ]]; then
		echo "commit $commit is not release $version: the newest release its CHANGELOG.md names is '${newest:-none}' (hack/previous-release)" >&2
		return 1
	fi
	if tagged=$(git -C "$dir" rev-parse -q --verify "refs/tags/$version^{commit}"); then
		if [[ $tagged != "$commit" ]]; then
			echo "tag $version names commit $tagged, but hack/previous-release records $commit for it: one of them is wrong" >&2
			return 1
		fi
	fi
}

# stamp FILE...: a digest of the files, the Go toolchain and the arguments
# after --, as hack/original/build.sh stamps what it builds.
stamp() {
	local files=()
	while (($#)) && [[ $1 != -- ]]; do
		files+=("$1")
		shift
	done
	shift
	{ cat "${files[@]}"; go version; echo "$@"; } | sha256sum | cut -d' ' -f1
}

main() {
	local load=false
	case ${1:-} in
	'') ;;
	--load) load=true ;;
	*)
		echo "usage: $0 [--load]" >&2
		exit 1
		;;
	esac
	LOG_TAG=previous-release
	# shellcheck source=local-cluster/lib.sh
	source "$PREVIOUS_RELEASE_HACK/local-cluster/lib.sh"
	# shellcheck source=previous-release
	source "$PREVIOUS_RELEASE_HACK/previous-release"
	local version=$PREVIOUS_RELEASE_VERSION commit=$PREVIOUS_RELEASE_COMMIT
	command -v go >/dev/null || die "go is not on PATH"
	release_commit_check "$REPO_ROOT" "$version" "$commit" || die "cannot build the previous release"

	local dir=$CACHE_DIR/previous-release/$version-$commit arch short image tarball want
	local tree=$dir/src
	arch=$(go env GOARCH)
	short=$(git -C "$REPO_ROOT" rev-parse --short "$commit")
	image=openetcd/etcd-operator:$version-release
	tarball=$dir/etcd-operator-$version-release-$arch.tar
	mkdir -p "$dir"

	# The marker is written last, so an extraction cut short is done again.
	if [[ -f $dir/src.done ]]; then
		log "tree: $version ($short) already in $tree"
	else
		log "tree: git archive $short | tar -x -C $tree"
		rm -rf "$tree" "$tree.new"
		mkdir -p "$tree.new"
		git -C "$REPO_ROOT" archive --format=tar "$commit" | tar -x -C "$tree.new"
		mv "$tree.new" "$tree"
		touch "$dir/src.done"
	fi

	want=$(stamp "${BASH_SOURCE[0]}" /etc/ssl/certs/ca-certificates.crt -- "$commit" "$arch")
	if [[ -f $tarball && $(cat "$tarball.stamp" 2>/dev/null) == "$want" ]]; then
		log "image: $image (linux/$arch) up to date in $tarball"
	else
		log "image: building $image (linux/$arch) with $version's own hack/build-image.sh"
		rm -f "$tarball.stamp"
		rm -rf "$dir/build"
		local start=$SECONDS
		# The tree has no .git: the version and commit are given, as its
		# Makefile's `make image VERSION=...` would give them, and Go is told
		# not to look for a repository (a cache directory inside another
		# clone would otherwise lend it that clone's).
		(cd "$tree" && GOFLAGS=-buildvcs=false GOWORK=off ARCHS="$arch" VERSION="$version" GIT_SHA="$short" \
			IMAGE="$image" OUT_DIR="$dir/build" OUT='' bash hack/build-image.sh) >&2 ||
			die "$version's hack/build-image.sh failed"
		[[ $(tar_image_ref "$dir/build/etcd-operator-image-$arch.tar") == "$image" ]] ||
			die "$version's build wrote no image tagged $image"
		mv "$dir/build/etcd-operator-image-$arch.tar" "$tarball"
		rm -rf "$dir/build" "$tree/_output"
		echo "$want" >"$tarball.stamp"
		log "image: built in $((SECONDS - start))s: $tarball"
	fi

	if $load; then
		bash "$LC_DIR/load-image.sh" "$tarball"
	fi
	printf '%s=%s\n' version "$version" commit "$commit" tree "$tree" image "$image" tarball "$tarball"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	main "$@"
fi
