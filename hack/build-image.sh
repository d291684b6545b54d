#!/usr/bin/env bash
# build-image.sh: build the project's container image without Docker.
#
# Compiles the three binaries (and etcd-checker) statically for each
# architecture in ARCHS, stamped with VERSION and GIT_SHA as `make build`
# stamps them, lays out a minimal root filesystem (like a distroless "static"
# base: users, CA certificates, /tmp) and writes one docker-archive tarball
# per architecture with hack/imagebuild (the layout of `docker save`:
# manifest.json, the config, one gzipped layer):
#   $OUT_DIR/etcd-operator-image-<arch>.tar, tagged IMAGE
#   _output/etcd-operator-image.tar, the build machine's architecture (when built)
# Load one into the local cluster with hack/local-cluster/load-image.sh, or
# anywhere else with `docker load` / `ctr images import`.
#
# Environment: ARCHS (default: the build machine's, `go env GOARCH`; `make
# image` gives "amd64 arm64"), VERSION (default from git, hack/version.sh),
# GIT_SHA (default the commit checked out, with -dirty for uncommitted
# changes), IMAGE (tag; default openetcd/etcd-operator:v<VERSION> when VERSION
# is given, else openetcd/etcd-operator:v0.1.0, the tag the example manifests,
# the local cluster and the e2e suite run, so that a development build
# replaces it whatever its binaries say), OUT_DIR (the per-architecture
# tarballs, default _output), OUT (the build machine's tarball, "" for none).
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO_ROOT"
HOST_ARCH=$(go env GOARCH)
ARCHS=${ARCHS:-$HOST_ARCH}
if [[ -n ${VERSION:-} ]]; then
	IMAGE=${IMAGE:-openetcd/etcd-operator:v${VERSION#v}}
else
	VERSION=$(bash "$REPO_ROOT/hack/version.sh")
	IMAGE=${IMAGE:-openetcd/etcd-operator:v0.1.0}
fi
if [[ -z ${GIT_SHA:-} ]]; then
	GIT_SHA=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
	if [[ $GIT_SHA != unknown && -n $(git status --porcelain --untracked-files=no 2>/dev/null) ]]; then
		GIT_SHA=$GIT_SHA-dirty
	fi
fi
OUT=${OUT-$REPO_ROOT/_output/etcd-operator-image.tar}
OUT_DIR=${OUT_DIR:-$REPO_ROOT/_output}
mkdir -p "$REPO_ROOT/_output" "$OUT_DIR"
# A directory of its own, so that two builds in one tree (make image beside an
# e2e run) do not remove each other's files.
WORK=$(mktemp -d "$REPO_ROOT/_output/image-build.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
APP_UID=65532
LDFLAGS="-s -w -X github.com/openetcd/etcd-operator/pkg/operatorrun.Version=$VERSION -X github.com/openetcd/etcd-operator/pkg/operatorrun.GitSHA=$GIT_SHA"

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

	tarball=$OUT_DIR/etcd-operator-image-$arch.tar
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
	if [[ $arch == "$HOST_ARCH" && -n $OUT ]]; then
		mkdir -p "$(dirname "$OUT")"
		cp "$tarball" "$OUT.part" && mv "$OUT.part" "$OUT"
		log "$OUT is the linux/$arch image"
	fi
done
