#!/usr/bin/env bash
# build-image.sh: build the project's container image without Docker.
#
# Compiles the three binaries (and etcd-checker) statically for each
# architecture in ARCHS, stamped with VERSION and GIT_SHA as `make build`
# stamps them, lays out a minimal root filesystem (like a distroless "static"
# base: users, CA certificates, /tmp) and writes one docker-archive tarball
# per architecture with hack/imagebuild (the layout of `docker save`:
# manifest.json, the config, one gzipped layer):
#   _output/etcd-operator-image-<arch>.tar, tagged openetcd/etcd-operator:v<VERSION>
#   _output/etcd-operator-image.tar, the build machine's architecture (when built)
# Load one into the local cluster with hack/local-cluster/load-image.sh, or
# anywhere else with `docker load` / `ctr images import`.
#
# Environment: ARCHS (default: the build machine's, `go env GOARCH`; `make
# image` gives "amd64 arm64"), VERSION (default 0.1.0), GIT_SHA (default the
# commit checked out, with -dirty for uncommitted changes), IMAGE (tag),
# OUT (the build machine's tarball).
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO_ROOT"
HOST_ARCH=$(go env GOARCH)
ARCHS=${ARCHS:-$HOST_ARCH}
VERSION=${VERSION:-0.1.0}
if [[ -z ${GIT_SHA:-} ]]; then
	GIT_SHA=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
	if [[ $GIT_SHA != unknown && -n $(git status --porcelain --untracked-files=no 2>/dev/null) ]]; then
		GIT_SHA=$GIT_SHA-dirty
	fi
fi
IMAGE=${IMAGE:-openetcd/etcd-operator:v$VERSION}
OUT=${OUT:-$REPO_ROOT/_output/etcd-operator-image.tar}
mkdir -p "$REPO_ROOT/_output"
# A directory of its own, so that two builds in one tree (make image beside an
# e2e run) do not remove each other's files.
WORK=$(mktemp -d "$REPO_ROOT/_output/image-build.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
APP_UID=65532
LDFLAGS="-s -w -X github.com/openetcd/etcd-operator/pkg/util/operatorrun.Version=$VERSION -X github.com/openetcd/etcd-operator/pkg/util/operatorrun.GitSHA=$GIT_SHA"

log() { printf '[build-image] %s\n' "$*" >&2; }

CGO_ENABLED=0 go build -o "$WORK/imagebuild" ./hack/imagebuild

for arch in $ARCHS; do
	ROOTFS=$WORK/$arch/rootfs
	mkdir -p "$ROOTFS/usr/local/bin" "$ROOTFS/etc/ssl/certs" "$ROOTFS/tmp" \
		"$ROOTFS/home/etcd-operator" "$WORK/$arch/bin"
	chmod 1777 "$ROOTFS/tmp"

	# One "go build" for the three commands shares the compilation of their
	# common packages; the directory output names them operator, backup-operator
	# and restore-operator.
	log "building binaries for linux/$arch ($VERSION, $GIT_SHA)"
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -ldflags "$LDFLAGS" -o "$WORK/$arch/bin/" \
		./cmd/operator ./cmd/backup-operator ./cmd/restore-operator ./cmd/etcd-checker
	install -m 0755 "$WORK/$arch/bin/operator" "$ROOTFS/usr/local/bin/etcd-operator"
	install -m 0755 "$WORK/$arch/bin/backup-operator" "$ROOTFS/usr/local/bin/etcd-backup-operator"
	install -m 0755 "$WORK/$arch/bin/restore-operator" "$ROOTFS/usr/local/bin/etcd-restore-operator"
	# The linearizability checker the fault tests run as a pod beside a cluster.
	install -m 0755 "$WORK/$arch/bin/etcd-checker" "$ROOTFS/usr/local/bin/etcd-checker"
	if [[ $arch == "$HOST_ARCH" ]]; then
		# The stamp is what -version and the startup log print; check it here,
		# where a broken -X path would otherwise pass silently.
		stamp=$("$ROOTFS/usr/local/bin/etcd-operator" -version 2>&1 || true)
		if [[ $stamp != *"$VERSION"* || $stamp != *"$GIT_SHA"* ]]; then
			log "ERROR: etcd-operator -version says '$stamp', want $VERSION and $GIT_SHA"
			exit 1
		fi
	fi

	cat >"$ROOTFS/etc/passwd" <<PASSWD
root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
etcd-operator:x:$APP_UID:$APP_UID:etcd-operator:/home/etcd-operator:/sbin/nologin
PASSWD
	cat >"$ROOTFS/etc/group" <<GROUP
root:x:0:
nogroup:x:65534:
etcd-operator:x:$APP_UID:
GROUP
	echo 'hosts: files dns' >"$ROOTFS/etc/nsswitch.conf"
	# TLS to S3 and other object stores needs the usual CA bundle.
	cp /etc/ssl/certs/ca-certificates.crt "$ROOTFS/etc/ssl/certs/"

	tarball=$REPO_ROOT/_output/etcd-operator-image-$arch.tar
	log "writing $tarball ($IMAGE, linux/$arch)"
	"$WORK/imagebuild" -rootfs "$ROOTFS" -tag "$IMAGE" -arch "$arch" -o "$tarball" \
		-entrypoint /usr/local/bin/etcd-operator \
		-env PATH=/usr/local/bin:/usr/bin:/bin \
		-env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
		-user "$APP_UID:$APP_UID" -workdir / \
		-chown "/home/etcd-operator=$APP_UID:$APP_UID" \
		-label org.opencontainers.image.source=https://github.com/openetcd/etcd-operator \
		-label org.opencontainers.image.title=etcd-operator \
		-label org.opencontainers.image.version="$VERSION" \
		-label org.opencontainers.image.revision="$GIT_SHA"
	if [[ $arch == "$HOST_ARCH" ]]; then
		mkdir -p "$(dirname "$OUT")"
		cp "$tarball" "$OUT.part" && mv "$OUT.part" "$OUT"
		log "$OUT is the linux/$arch image"
	fi
done
