#!/usr/bin/env bash
# build-image.sh: build the project's container image without Docker.
#
# Compiles the three binaries (and etcd-checker) statically, lays out a minimal root filesystem
# (like a distroless "static" base: users, CA certificates, /tmp) and writes
# a docker-format tarball with hack/imagebuild:
#   _output/etcd-operator-image.tar, tagged openetcd/etcd-operator:v0.1.0
# Load it into the local cluster with hack/local-cluster/load-image.sh, or
# anywhere else with `docker load` / `ctr images import`.
#
# Environment: IMAGE (tag), OUT (tarball path).
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
IMAGE=${IMAGE:-openetcd/etcd-operator:v0.1.0}
OUT=${OUT:-$REPO_ROOT/_output/etcd-operator-image.tar}
WORK=$REPO_ROOT/_output/image-build
ROOTFS=$WORK/rootfs
APP_UID=65532

log() { printf '[build-image] %s\n' "$*" >&2; }

cd "$REPO_ROOT"
rm -rf "$WORK"
mkdir -p "$ROOTFS/usr/local/bin" "$ROOTFS/etc/ssl/certs" "$ROOTFS/tmp" \
	"$ROOTFS/home/etcd-operator" "$WORK/bin"
chmod 1777 "$ROOTFS/tmp"

# One "go build" for the three commands shares the compilation of their
# common packages; the directory output names them operator, backup-operator
# and restore-operator.
log "building binaries"
CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags '-s -w' -o "$WORK/bin/" \
	./cmd/operator ./cmd/backup-operator ./cmd/restore-operator ./cmd/etcd-checker
install -m 0755 "$WORK/bin/operator" "$ROOTFS/usr/local/bin/etcd-operator"
install -m 0755 "$WORK/bin/backup-operator" "$ROOTFS/usr/local/bin/etcd-backup-operator"
install -m 0755 "$WORK/bin/restore-operator" "$ROOTFS/usr/local/bin/etcd-restore-operator"
# The linearizability checker the fault tests run as a pod beside a cluster.
install -m 0755 "$WORK/bin/etcd-checker" "$ROOTFS/usr/local/bin/etcd-checker"

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

log "writing $OUT ($IMAGE)"
CGO_ENABLED=0 go build -o "$WORK/imagebuild" ./hack/imagebuild
"$WORK/imagebuild" -rootfs "$ROOTFS" -tag "$IMAGE" -o "$OUT" \
	-entrypoint /usr/local/bin/etcd-operator \
	-env PATH=/usr/local/bin:/usr/bin:/bin \
	-env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
	-user "$APP_UID:$APP_UID" -workdir / \
	-chown "/home/etcd-operator=$APP_UID:$APP_UID" \
	-label org.opencontainers.image.source=https://github.com/openetcd/etcd-operator \
	-label org.opencontainers.image.title=etcd-operator
