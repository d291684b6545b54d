# syntax=docker/dockerfile:1
#
# etcd-operator image: the operator, backup operator and restore operator
# (and etcd-checker, the linearizability checker of the fault tests),
# static binaries on an empty base, running as non-root (65532).
#
#   docker build -t openetcd/etcd-operator:v0.1.0 \
#     --build-arg VERSION=$(bash hack/version.sh) --build-arg GIT_SHA=$(git rev-parse --short HEAD) .
#   docker buildx build --platform linux/amd64,linux/arm64 ... (both architectures)
#
# .git is not in the build context (.dockerignore), so the commit comes in as
# a build argument; the binaries print both with -version and at startup.
#
# Without a Docker engine, hack/build-image.sh builds an equivalent image.

# The builder runs on the build machine's platform and cross-compiles for
# the target platform (BuildKit sets BUILDPLATFORM/TARGETOS/TARGETARCH).
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src

# Dependencies first, so this layer is reused while only the code changes.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download

COPY . .
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=v0.0.0-unknown
ARG GIT_SHA=unknown
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath \
        -ldflags "-s -w -X github.com/openetcd/etcd-operator/pkg/operatorrun.Version=${VERSION} -X github.com/openetcd/etcd-operator/pkg/operatorrun.GitSHA=${GIT_SHA}" \
        -o /out/ \
        ./cmd/operator ./cmd/backup-operator ./cmd/restore-operator ./cmd/etcd-checker \
 && mv /out/operator /out/etcd-operator \
 && mv /out/backup-operator /out/etcd-backup-operator \
 && mv /out/restore-operator /out/etcd-restore-operator

# The runtime image holds only the binaries, the CA bundle (for S3 over https)
# and a passwd entry for the non-root user: no shell, no package manager.
RUN mkdir -p /rootfs/etc /rootfs/tmp && chmod 1777 /rootfs/tmp \
 && echo 'etcd-operator:x:65532:65532:etcd-operator:/tmp:/sbin/nologin' > /rootfs/etc/passwd \
 && echo 'etcd-operator:x:65532:' > /rootfs/etc/group

FROM scratch
ARG VERSION=v0.0.0-unknown
ARG GIT_SHA=unknown
LABEL org.opencontainers.image.source=https://github.com/openetcd/etcd-operator \
      org.opencontainers.image.title=etcd-operator \
      org.opencontainers.image.version=${VERSION} \
      org.opencontainers.image.revision=${GIT_SHA}
COPY --from=build /rootfs/ /
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/etcd-operator /out/etcd-backup-operator /out/etcd-restore-operator /out/etcd-checker /usr/local/bin/
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/etcd-operator"]
