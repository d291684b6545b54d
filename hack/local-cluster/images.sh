# shellcheck shell=bash
# images.sh: assembles the root filesystems of the cluster's images and turns
# them into tarballs with hack/imagebuild (no Docker, no registry). Sourced by
# up.sh. Output: $IMAGES_DIR/<name>.tar. imagebuild is reproducible, so an
# unchanged image gives the same tarball and import_image skips it.

DEFAULT_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# copy_with_libs SRC ROOTFS DEST: copy the executable SRC to ROOTFS/DEST and,
# if it is dynamically linked, the shared libraries and loader it needs, at
# the same paths as on this host.
copy_with_libs() {
	local src=$1 root=$2 dest=$3 lib
	install -D -m 0755 "$src" "$root$dest"
	# ldd fails ("not a dynamic executable") for static binaries.
	ldd "$src" >/dev/null 2>&1 || return 0
	for lib in $(ldd "$src" | grep -o '/[^ ]*'); do
		[[ -e $root$lib ]] || install -D -m 0755 "$(readlink -f "$lib")" "$root$lib"
	done
}

# base_rootfs ROOTFS: what a distroless "static" base provides: users root,
# nobody and nonroot (65532), CA certificates, nsswitch.conf, a sticky /tmp.
base_rootfs() {
	local root=$1
	rm -rf "$root"
	mkdir -p "$root/etc/ssl/certs" "$root/tmp" "$root/root"
	chmod 1777 "$root/tmp"
	chmod 0700 "$root/root"
	cat >"$root/etc/passwd" <<-'EOF'
		root:x:0:0:root:/root:/sbin/nologin
		nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
		nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
	EOF
	cat >"$root/etc/group" <<-'EOF'
		root:x:0:
		nogroup:x:65534:
		nonroot:x:65532:
	EOF
	echo 'hosts: files dns' >"$root/etc/nsswitch.conf"
	cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
}

# imagebuild ARGS...: the repository's image builder (built by build.sh).
imagebuild() { "$TOOLS_DIR/imagebuild" "$@" >/dev/null; }

# The pod sandbox image: only the static pause program.
image_pause() {
	local root=$IMAGES_DIR/pause-rootfs
	rm -rf "$root" && mkdir -p "$root"
	install -m 0755 "$TOOLS_DIR/pause" "$root/pause"
	imagebuild -rootfs "$root" -tag "$PAUSE_IMAGE" -entrypoint /pause -user 65535:65535 \
		-o "$IMAGES_DIR/pause.tar"
}

# busybox_path: the host's busybox (Debian's busybox-static, see APT_PACKAGES).
busybox_path() { command -v busybox || echo /bin/busybox; }

# busybox_applets ROOTFS SKIP: install the host's busybox as ROOTFS/bin/busybox
# with a link for each of its applets, at the paths busybox lists (bin/sh,
# usr/bin/env, ...), except the applet paths matching the glob SKIP.
busybox_applets() {
	local root=$1 skip=$2 bb applet
	bb=$(busybox_path)
	copy_with_libs "$bb" "$root" /bin/busybox
	for applet in $("$bb" --list-full); do
		# shellcheck disable=SC2053 # $skip is a glob
		if [[ $applet == bin/busybox || $applet == $skip ]]; then continue; fi
		mkdir -p "$root/$(dirname "$applet")"
		ln -sf /bin/busybox "$root/$applet"
	done
}

# busybox:1.28.0-glibc, the operator's default init-container image. Debian's
# static busybox provides the applets, with two exceptions the operator's
# DNS wait loop depends on:
#   /bin/sh is dash: busybox's shell runs its own nslookup applet even when
#     another nslookup comes first in PATH;
#   nslookup is a static Go program: busybox nslookup ignores the resolv.conf
#     search list, so "<pod>.<cluster>.<ns>.svc" would never resolve.
image_busybox() {
	local root=$IMAGES_DIR/busybox-rootfs
	base_rootfs "$root"
	sed -i 's#^root:.*#root:x:0:0:root:/root:/bin/sh#' "$root/etc/passwd"
	busybox_applets "$root" '@(bin/sh|*/nslookup)'
	copy_with_libs "$(readlink -f /usr/bin/dash)" "$root" /bin/dash
	ln -sf dash "$root/bin/sh"
	install -D -m 0755 "$TOOLS_DIR/nslookup" "$root/usr/local/bin/nslookup"
	ln -sf /usr/local/bin/nslookup "$root/usr/bin/nslookup"
	imagebuild -rootfs "$root" -tag "$BUSYBOX_IMAGE" -cmd sh -env "PATH=$DEFAULT_PATH" \
		-o "$IMAGES_DIR/busybox.tar"
}

# etcd_image_has_shell VERSION: whether the published quay.io/coreos/etcd
# image of VERSION has a shell. Up to 3.4 it was built FROM a Debian base
# (k8s.gcr.io debian-base): /bin/sh, env and the core utilities are there,
# and guides run `kubectl exec <member> -- env ETCDCTL_API=3 etcdctl ...` or
# `-- sh -c '...'`. From 3.5 it is distroless: no shell at all.
etcd_image_has_shell() {
	local major=${1%%.*} minor=${1#*.}
	minor=${minor%%.*}
	((major < 3 || (major == 3 && minor < 5)))
}

# quay.io/coreos/etcd:vX.Y.Z with the contents of the published image of that
# version: etcd, etcdctl, etcdutl (3.5+) in /usr/local/bin, /var/etcd. 3.5+
# are distroless, with no shell, so the operator's pod spec cannot come to
# depend on one. 3.4 has a shell and the usual commands, here busybox's
# applets (static, so they run as any user and need no library) standing in
# for Debian's.
image_etcd() {
	local v=$1 root=$IMAGES_DIR/etcd-v$1-rootfs dir b
	dir=$(etcd_bin_dir "$v")
	base_rootfs "$root"
	for b in etcd etcdctl etcdutl; do # no etcdutl before 3.5
		if [[ -f $dir/$b ]]; then copy_with_libs "$dir/$b" "$root" "/usr/local/bin/$b"; fi
	done
	mkdir -p "$root/var/etcd" "$root/var/lib/etcd"
	if etcd_image_has_shell "$v"; then
		sed -i 's#^root:.*#root:x:0:0:root:/root:/bin/sh#' "$root/etc/passwd"
		busybox_applets "$root" linuxrc
	fi
	imagebuild -rootfs "$root" -tag "$ETCD_IMAGE_REPO:v$v" -cmd /usr/local/bin/etcd \
		-env "PATH=$DEFAULT_PATH" -workdir / -o "$IMAGES_DIR/etcd-v$v.tar"
	if etcd_image_has_shell "$v"; then
		[[ -e $root/bin/sh && -e $root/usr/bin/env ]] || die "etcd $v image rootfs lacks /bin/sh or /usr/bin/env"
	else
		# No shell may slip in through copied libraries or the base.
		[[ ! -e $root/bin/sh && ! -e $root/usr/bin/sh ]] || die "etcd $v image rootfs contains a shell"
	fi
}

# CoreDNS runs as root in this cluster: the upstream image instead relies on
# a file capability to bind port 53 as non-root, which this builder does not
# record.
image_coredns() {
	local root=$IMAGES_DIR/coredns-rootfs
	base_rootfs "$root"
	install -m 0755 "$COREDNS_BIN/coredns" "$root/coredns"
	imagebuild -rootfs "$root" -tag "$COREDNS_IMAGE" -entrypoint /coredns -workdir / \
		-o "$IMAGES_DIR/coredns.tar"
}

# cached_image NAME FUNCTION [ARGS...] -- INPUT...: run FUNCTION ARGS to
# (re)build $IMAGES_DIR/NAME.tar unless it was last built from the same
# INPUT files, the same recipes (this file, lib.sh) and the same imagebuild.
cached_image() {
	local name=$1 fn=$2 args=() stamp
	shift 2
	while [[ $1 != -- ]]; do
		args+=("$1")
		shift
	done
	shift
	stamp=$(cat "$@" "$LC_DIR/images.sh" "$LC_DIR/lib.sh" "$TOOLS_DIR/imagebuild" \
		/etc/ssl/certs/ca-certificates.crt | sha256sum | cut -d' ' -f1)
	if [[ -f $IMAGES_DIR/$name.tar && $(cat "$IMAGES_DIR/$name.stamp" 2>/dev/null) == "$stamp" ]]; then
		return 0
	fi
	rm -f "$IMAGES_DIR/$name.stamp"
	"$fn" "${args[@]}"
	echo "$stamp" >"$IMAGES_DIR/$name.stamp"
	log "image $name: built"
}

# build_images: all tarballs except the project's own (hack/build-image.sh).
build_images() {
	local v dir
	mkdir -p "$IMAGES_DIR"
	cached_image pause image_pause -- "$TOOLS_DIR/pause"
	cached_image busybox image_busybox -- "$(busybox_path)" /usr/bin/dash "$TOOLS_DIR/nslookup"
	cached_image coredns image_coredns -- "$COREDNS_BIN/coredns"
	for v in "$ETCD_DEBIAN_VERSION" "${ETCD_BUILT_VERSIONS[@]}"; do
		dir=$(etcd_bin_dir "$v")
		if etcd_image_has_shell "$v"; then
			cached_image "etcd-v$v" image_etcd "$v" -- "$dir"/etcd* "$(busybox_path)"
		else
			cached_image "etcd-v$v" image_etcd "$v" -- "$dir"/etcd*
		fi
	done
}

# image_tarballs: the tarballs build_images writes, in import order.
image_tarballs() {
	local v
	echo "$IMAGES_DIR/pause.tar" "$IMAGES_DIR/busybox.tar" "$IMAGES_DIR/coredns.tar"
	for v in "$ETCD_DEBIAN_VERSION" "${ETCD_BUILT_VERSIONS[@]}"; do echo "$IMAGES_DIR/etcd-v$v.tar"; done
}
