#!/usr/bin/env bash
# build.sh: build cert-manager's controller for the local cluster (no Docker,
# no registry), from the Go module proxy:
#
#   1. builds main.go beside this script (its own module: go.mod and go.sum
#      here pin github.com/cert-manager/cert-manager and everything it needs)
#      statically (CGO_ENABLED=0) into the cache. The proxy does not serve
#      the module of cert-manager's own controller binary, so main.go runs
#      the controllers of the SelfSigned and CA issuers and of Certificates
#      from the main module's packages (see the comment at its top);
#   2. writes the image cert-manager-controller:<version>-local (the version
#      go.mod requires): the binary in /usr/local/bin, CA certificates, the
#      user nonroot (65532) of a distroless "static" base.
#
# Nothing is written to the repository: the binary and the tarball live under
# $CACHE_DIR/cert-manager/<version>. A second run with the same inputs (this
# script, common.sh, main.go, go.mod, go.sum, the Go version) rebuilds
# nothing. Prints the binary's and the tarball's paths, one per line, on
# stdout. deploy.sh runs it.
# shellcheck source-path=SCRIPTDIR disable=SC2034 # LOG_TAG is read by lib.sh
set -euo pipefail

LOG_TAG=cert-manager-build
CM_HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../local-cluster/lib.sh
source "$CM_HACK/../local-cluster/lib.sh"
# shellcheck source=common.sh
source "$CM_HACK/common.sh"
# shellcheck source=../local-cluster/images.sh
source "$LC_DIR/images.sh"

command -v go >/dev/null || die "go is not on PATH"
mkdir -p "$CM_DIR"



# build_binary: step 1, unless the binary was built from the same inputs.
build_binary() {
	local want
	want=$(stamp "$CM_HACK/build.sh" "$CM_HACK/common.sh" "$CM_HACK/main.go" "$CM_HACK/go.mod" "$CM_HACK/go.sum")
	if [[ -x $CM_BIN && $(cat "$CM_BIN.stamp" 2>/dev/null) == "$want" ]]; then
		log "step 1: $CM_BIN up to date"
		return 0
	fi
	log "step 1: building $CM_NAME ($CM_MODULE $CM_VERSION; CGO_ENABLED=0; a few minutes the first time)"
	rm -f "$CM_BIN.stamp" "$CM_BIN.new"
	mkdir -p "$(dirname "$CM_BIN")"
	local t0=$SECONDS
	CGO_ENABLED=0 GOOS=linux cm_go build -trimpath -ldflags "-s -w" -o "$CM_BIN.new" .
	"$CM_BIN.new" -h 2>&1 | grep -q -- -cluster-resource-namespace ||
		die "the built $CM_NAME does not know -cluster-resource-namespace"
	mv "$CM_BIN.new" "$CM_BIN"
	echo "$want" >"$CM_BIN.stamp"
	log "step 1: built $CM_BIN in $((SECONDS - t0))s"
}

# write_image: step 2.
write_image() {
	local root=$CM_DIR/rootfs
	base_rootfs "$root"
	install -D -m 0755 "$CM_BIN" "$root/usr/local/bin/$CM_NAME"
	imagebuild -rootfs "$root" -tag "$CM_IMAGE" -o "$CM_IMAGE_TAR.new" \
		-entrypoint "/usr/local/bin/$CM_NAME" -env "PATH=$DEFAULT_PATH" -user 65532:65532 -workdir / \
		-label "org.opencontainers.image.version=$CM_VERSION"
	mv "$CM_IMAGE_TAR.new" "$CM_IMAGE_TAR"
	rm -rf "$root"
}

build_binary
ensure_tool imagebuild hack/imagebuild
want=$(stamp "$CM_HACK/build.sh" "$TOOLS_DIR/imagebuild" "$CM_BIN.stamp" /etc/ssl/certs/ca-certificates.crt)
if [[ -f $CM_IMAGE_TAR && $(cat "$CM_IMAGE_TAR.stamp" 2>/dev/null) == "$want" ]]; then
	log "step 2: $CM_IMAGE up to date"
else
	log "step 2: writing $CM_IMAGE"
	rm -f "$CM_IMAGE_TAR.stamp"
	write_image
	echo "$want" >"$CM_IMAGE_TAR.stamp"
fi

echo "$CM_BIN"
echo "$CM_IMAGE_TAR"
