#!/usr/bin/env bash
# build.sh: build the original coreos/etcd-operator v0.9.4 and the images its
# example deployment runs, for the local cluster (no Docker, no registry).
#
#   1. fetches github.com/coreos/etcd-operator@v0.9.4 from the Go module proxy
#      (`go mod download`) and copies it into a throwaway directory under the
#      cache, with the module file beside this script (v0.9.4.go.mod and
#      .go.sum: the original used dep, see the comment in v0.9.4.go.mod);
#   2. applies the two changes to its code:
#      publish-not-ready-addresses.patch: its Services ask for the DNS records
#      of unready pods with the annotation
#      service.alpha.kubernetes.io/tolerate-unready-endpoints, which
#      Kubernetes 1.32 no longer reads; without spec.publishNotReadyAddresses
#      a member pod's name never resolves while the pod is unready, so its
#      check-dns init container waits for ever and the first member never
#      starts;
#      fetch-backup-pull-policy.patch: the restore operator's seed pod runs
#      its fetch-backup init container from the untagged image tutum/curl,
#      which Kubernetes pulls Always, from a registry; the local image of
#      step 6 is used when the pull policy is IfNotPresent;
#   3. builds etcd-operator, etcd-backup-operator and etcd-restore-operator
#      statically (CGO_ENABLED=0);
#   4. writes the image quay.io/coreos/etcd-operator:v0.9.4, the tag of the
#      original's example/deployment.yaml and of its backup and restore
#      operator deployments: the three binaries in /usr/local/bin, CA
#      certificates, running as the user etcd-operator (uid 1000, as alpine's
#      adduser made it);
#   5. writes busybox:1.28.0-glibc, the image of the original's check-dns init
#      container, with the local cluster's recipe (hack/local-cluster/images.sh):
#      Debian's busybox would loop for ever in the original's
#      `nslookup <pod>.<cluster>.<ns>.svc`, as its nslookup ignores the
#      resolv.conf search list; the image has dash as /bin/sh and a Go
#      nslookup that honours it. The tarball is the local cluster's own, so
#      the two never disagree about that tag;
#   6. writes tutum/curl (latest), the image of the restore operator's
#      fetch-backup init container: bash and curl from Debian with the
#      libraries they load, and busybox's applets for the rest.
#
# Nothing of the original is written to the repository: its source, the
# binaries and the tarballs live under $CACHE_DIR/original/v0.9.4. A second
# run with the same inputs (this script, the module file, the patch, the Go
# version) rebuilds nothing. Prints the paths it made, one per line, on stdout.
# shellcheck source-path=SCRIPTDIR disable=SC2034 # LOG_TAG is read by lib.sh
set -euo pipefail

LOG_TAG=original-build
ORIG_HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../local-cluster/lib.sh
source "$ORIG_HACK/../local-cluster/lib.sh"
# shellcheck source=common.sh
source "$ORIG_HACK/common.sh"

ORIG_MODULE=github.com/coreos/etcd-operator
ORIG_UID=1000
ORIG_DIR=$CACHE_DIR/original/$ORIG_VERSION
ORIG_SRC=$ORIG_DIR/src
ORIG_BIN=$ORIG_DIR/bin
ORIG_IMAGE_TAR=$ORIG_DIR/etcd-operator-$ORIG_VERSION.tar
BINARIES=(etcd-operator etcd-backup-operator etcd-restore-operator)

command -v go >/dev/null || die "go is not on PATH"
mkdir -p "$ORIG_DIR"


# have_binaries: whether all three binaries are in $ORIG_BIN.
have_binaries() {
	local b
	for b in "${BINARIES[@]}"; do [[ -x $ORIG_BIN/$b ]] || return 1; done
}

# build_binaries: steps 1-3, unless the binaries were built from the same
# script, module file, patch and Go.
build_binaries() {
	local want have dir
	want=$(stamp "$ORIG_HACK/build.sh" "$ORIG_HACK/common.sh" "$ORIG_HACK/$ORIG_VERSION.go.mod" \
		"$ORIG_HACK/$ORIG_VERSION.go.sum" "$ORIG_HACK/publish-not-ready-addresses.patch" \
		"$ORIG_HACK/fetch-backup-pull-policy.patch")
	have=$(cat "$ORIG_BIN/.stamp" 2>/dev/null || true)
	if [[ $want == "$have" ]] && have_binaries; then
		log "binaries: up to date in $ORIG_BIN"
		return 0
	fi

	log "step 1: fetching $ORIG_MODULE@$ORIG_VERSION from the module proxy"
	dir=$(cd "$ORIG_DIR" && go mod download -json "$ORIG_MODULE@$ORIG_VERSION" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[[ -n $dir && -f $dir/Gopkg.lock ]] || die "go mod download gave no source directory for $ORIG_MODULE@$ORIG_VERSION"
	rm -rf "$ORIG_SRC"
	cp -r "$dir" "$ORIG_SRC"
	chmod -R u+w "$ORIG_SRC"
	# Its tests and vendored tools are not built; its e2e packages import
	# modules the module file does not list.
	rm -rf "$ORIG_SRC/test" "$ORIG_SRC/hack"
	cp "$ORIG_HACK/$ORIG_VERSION.go.mod" "$ORIG_SRC/go.mod"
	cp "$ORIG_HACK/$ORIG_VERSION.go.sum" "$ORIG_SRC/go.sum"

	log "step 2: applying publish-not-ready-addresses.patch"
	patch -s -p1 -d "$ORIG_SRC" --forward <"$ORIG_HACK/publish-not-ready-addresses.patch" ||
		die "publish-not-ready-addresses.patch does not apply to $ORIG_MODULE@$ORIG_VERSION"
	grep -q 'PublishNotReadyAddresses: true' "$ORIG_SRC/pkg/util/k8sutil/k8sutil.go" ||
		die "the patch did not set PublishNotReadyAddresses"
	log "step 2: applying fetch-backup-pull-policy.patch"
	patch -s -p1 -d "$ORIG_SRC" --forward <"$ORIG_HACK/fetch-backup-pull-policy.patch" ||
		die "fetch-backup-pull-policy.patch does not apply to $ORIG_MODULE@$ORIG_VERSION"

	log "step 3: building ${BINARIES[*]} (CGO_ENABLED=0; a few minutes the first time)"
	rm -rf "$ORIG_BIN.new"
	mkdir -p "$ORIG_BIN.new"
	(cd "$ORIG_SRC" && CGO_ENABLED=0 GOOS=linux GOWORK=off GOFLAGS=-mod=readonly go build -trimpath \
		-ldflags "-s -w -X $ORIG_MODULE/version.GitSHA=$ORIG_VERSION+publish-not-ready-addresses" \
		-o "$ORIG_BIN.new/" ./cmd/operator ./cmd/backup-operator ./cmd/restore-operator)
	# The names the original's Dockerfile gave them.
	mv "$ORIG_BIN.new/operator" "$ORIG_BIN.new/etcd-operator"
	mv "$ORIG_BIN.new/backup-operator" "$ORIG_BIN.new/etcd-backup-operator"
	mv "$ORIG_BIN.new/restore-operator" "$ORIG_BIN.new/etcd-restore-operator"
	# The original checks its environment before -version.
	MY_POD_NAMESPACE=build MY_POD_NAME=build "$ORIG_BIN.new/etcd-operator" -version | grep -q "Version: ${ORIG_VERSION#v}" ||
		die "the built etcd-operator does not say it is ${ORIG_VERSION#v}"
	echo "$want" >"$ORIG_BIN.new/.stamp"
	rm -rf "$ORIG_BIN"
	mv "$ORIG_BIN.new" "$ORIG_BIN"
	log "binaries: built in $ORIG_BIN"
}


# image_original: step 4.
image_original() {
	local root=$ORIG_DIR/rootfs b
	rm -rf "$root"
	mkdir -p "$root/usr/local/bin" "$root/etc/ssl/certs" "$root/tmp" "$root/home/etcd-operator"
	chmod 1777 "$root/tmp"
	for b in "${BINARIES[@]}"; do install -m 0755 "$ORIG_BIN/$b" "$root/usr/local/bin/$b"; done
	cat >"$root/etc/passwd" <<-EOF
		root:x:0:0:root:/root:/sbin/nologin
		nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
		etcd-operator:x:$ORIG_UID:$ORIG_UID:etcd-operator:/home/etcd-operator:/sbin/nologin
	EOF
	cat >"$root/etc/group" <<-EOF
		root:x:0:
		nogroup:x:65534:
		etcd-operator:x:$ORIG_UID:
	EOF
	echo 'hosts: files dns' >"$root/etc/nsswitch.conf"
	cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
	"$TOOLS_DIR/imagebuild" -rootfs "$root" -tag "$ORIG_IMAGE" -o "$ORIG_IMAGE_TAR.new" \
		-cmd etcd-operator -env "PATH=$DEFAULT_PATH" -user etcd-operator -workdir / \
		-chown "/home/etcd-operator=$ORIG_UID:$ORIG_UID" >/dev/null
	mv "$ORIG_IMAGE_TAR.new" "$ORIG_IMAGE_TAR"
	rm -rf "$root"
}

# image_tutum_curl: step 6. The fetch-backup container runs
# `/bin/bash -ec 'httpcode=$(curl --write-out ... --output FILE URL) ...'`
# and cats the file into /dev/termination-log when the answer is not 200.
image_tutum_curl() {
	local root=$IMAGES_DIR/tutum-curl-rootfs
	base_rootfs "$root"
	sed -i 's#^root:.*#root:x:0:0:root:/root:/bin/bash#' "$root/etc/passwd"
	busybox_applets "$root" '@(bin/sh|bin/bash|*/curl)'
	copy_with_libs /usr/bin/bash "$root" /bin/bash
	ln -sf bash "$root/bin/sh"
	copy_with_libs /usr/bin/curl "$root" /usr/bin/curl
	"$TOOLS_DIR/imagebuild" -rootfs "$root" -tag "$CURL_IMAGE" -cmd /bin/bash -env "PATH=$DEFAULT_PATH" \
		-o "$IMAGES_DIR/tutum-curl.tar" >/dev/null
	rm -rf "$root"
}

build_binaries

# shellcheck source=../local-cluster/images.sh
source "$LC_DIR/images.sh"
ensure_tool imagebuild hack/imagebuild
ensure_tool nslookup hack/local-cluster/nslookup

want=$(stamp "$ORIG_HACK/build.sh" "$TOOLS_DIR/imagebuild" "$ORIG_BIN/.stamp" /etc/ssl/certs/ca-certificates.crt)
if [[ -f $ORIG_IMAGE_TAR && $(cat "$ORIG_IMAGE_TAR.stamp" 2>/dev/null) == "$want" ]]; then
	log "step 4: $ORIG_IMAGE up to date"
else
	log "step 4: writing $ORIG_IMAGE"
	rm -f "$ORIG_IMAGE_TAR.stamp"
	image_original
	echo "$want" >"$ORIG_IMAGE_TAR.stamp"
fi

log "step 5: $BUSYBOX_IMAGE (the check-dns init container) with the local cluster's recipe"
for need in "$(busybox_path)" /usr/bin/dash; do
	[[ -x $need ]] || die "$need is missing: apt-get install busybox-static dash (hack/local-cluster/up.sh installs them)"
done
mkdir -p "$IMAGES_DIR"
cached_image busybox image_busybox -- "$(busybox_path)" /usr/bin/dash "$TOOLS_DIR/nslookup"

log "step 6: $CURL_IMAGE (the restore operator's fetch-backup init container)"
for need in /usr/bin/bash /usr/bin/curl; do
	[[ -x $need ]] || die "$need is missing: apt-get install bash curl (hack/local-cluster/up.sh installs curl)"
done
cached_image tutum-curl image_tutum_curl -- /usr/bin/bash /usr/bin/curl "$ORIG_HACK/build.sh"

for b in "${BINARIES[@]}"; do echo "$ORIG_BIN/$b"; done
echo "$ORIG_IMAGE_TAR"
echo "$IMAGES_DIR/busybox.tar"
echo "$IMAGES_DIR/tutum-curl.tar"
