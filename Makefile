# The verbs people expect. `make test` is what CI runs (.ci/run).
SHELL := /bin/bash
GO ?= go
# VERSION is what the binaries, the image and the chart say they are: from git
# (hack/version.sh: the tag, or git describe between tags, -dirty with
# uncommitted changes); `make release VERSION=v0.2.0` names a release.
# Computed once, not at each use.
ifeq ($(origin VERSION),undefined)
VERSION := $(shell bash hack/version.sh)
endif
GIT_SHA := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X github.com/openetcd/etcd-operator/pkg/operatorrun.Version=$(VERSION) \
	-X github.com/openetcd/etcd-operator/pkg/operatorrun.GitSHA=$(GIT_SHA)
BINARIES := etcd-operator etcd-backup-operator etcd-restore-operator kubectl-etcd etcd-checker
PKG_etcd-operator := ./cmd/operator
PKG_etcd-backup-operator := ./cmd/backup-operator
PKG_etcd-restore-operator := ./cmd/restore-operator
PKG_kubectl-etcd := ./cmd/kubectl-etcd
PKG_etcd-checker := ./cmd/etcd-checker

.PHONY: all build unit test fuzz verify generate docs vet lint fmt image release e2e e2e-nodes e2e-original e2e-cert-manager e2e-upgrade chaos bench bench-go try local-up local-down cert-manager clean

all: build

## build: the three operators and the kubectl plugin (kubectl-etcd) under _output/bin
build:
	@mkdir -p _output/bin
	@for b in $(BINARIES); do \
		pkg=$$(case $$b in etcd-operator) echo ./cmd/operator;; etcd-backup-operator) echo ./cmd/backup-operator;; etcd-restore-operator) echo ./cmd/restore-operator;; kubectl-etcd) echo ./cmd/kubectl-etcd;; etcd-checker) echo ./cmd/etcd-checker;; esac); \
		echo "go build $$pkg -> _output/bin/$$b"; \
		CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o _output/bin/$$b $$pkg || exit 1; \
	done

## unit: unit tests (fake clientsets, embedded etcd, etcd 3.5, 3.6 and 3.7 processes, kube-apiserver on etcd, in-process S3 and GCS,
## Azurite and versitygw processes, promtool on the alert rules, helm on the chart, etcd's benchmark tool
## against an etcd process) with the race detector
unit:
	ETCD_BIN_DIR_3_6=$$(bash hack/etcd-binaries.sh) ETCD_BIN_DIR_3_5=$$(bash hack/etcd-binaries.sh 3.5.21) \
	ETCD_BIN_DIR_3_7=$$(bash hack/etcd-binaries.sh 3.7.3) \
	KUBE_BIN_DIR=$$(bash hack/kube-binaries.sh) AZURITE_BLOB=$$(bash hack/azurite.sh) VERSITYGW=$$(bash hack/versitygw.sh) \
	PROMTOOL=$$(bash hack/tools.sh promtool) HELM=$$(bash hack/tools.sh helm) ETCD_BENCHMARK=$$(bash hack/tools.sh benchmark) \
		$(GO) test -race -count=1 ./...

## verify: formatting, vet, generated code and generated docs (the reference pages, and the results pages
## against their data) are up to date, and the docs' links resolve
verify: fmt vet
	bash hack/verify-codegen.sh
	bash hack/verify-docs.sh

fmt:
	@out=$$(gofmt -l cmd pkg hack test 2>/dev/null); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet lint:
	$(GO) vet ./...

## generate: regenerate clients, deepcopy and example/crd, then the generated docs
generate:
	bash hack/update-codegen.sh
	$(MAKE) --no-print-directory docs

## docs: the reference pages made from the code: docs/reference/api.md (the API types'
## field docs, through the CRDs) and docs/reference/events.md (pkg/cluster's problem vocabulary);
## and the results pages (docs/results/*.md) from their committed data, docs/results/data
docs:
	$(GO) run ./hack/gen-docs reference -o docs/reference
	$(GO) run ./hack/gen-docs results

## test: everything CI checks
test:
	bash hack/test.sh

## fuzz: the model checker of the operator's safety contract on histories the fuzzer makes
## (pkg/cluster/contract_test.go), for FUZZTIME; FUZZIGNORE=C1,L3 leaves out rules being fixed.
## A history that breaks the contract is shrunk and told step by step, and kept in testdata/fuzz.
FUZZTIME ?= 5m
FUZZIGNORE ?=
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzSafetyContract$$' -fuzztime $(FUZZTIME) ./pkg/cluster/ -args -contract.ignore='$(FUZZIGNORE)'

## image: the operator image for linux/amd64 and linux/arm64, without Docker: docker-archive
## tarballs (`docker save` layout) _output/etcd-operator-image-{amd64,arm64}.tar, stamped with VERSION and the commit.
## Tagged openetcd/etcd-operator:v0.1.0, the tag the example manifests and the local cluster name,
## unless VERSION or IMAGE is given (`make image VERSION=v0.2.0` tags v0.2.0).
image:
	ARCHS="amd64 arm64" $(if $(filter file,$(origin VERSION)),,VERSION=$(VERSION)) bash hack/build-image.sh

## release: everything a release publishes, into _output/release (docs/development/release.md): the image for
## linux/amd64 and linux/arm64 as one OCI layout tarball, the Helm chart, the kubectl plugin for
## Linux, macOS and Windows, SHA256SUMS. Refuses a VERSION without an entry in CHANGELOG.md.
## No Docker, no registry: `make release VERSION=v0.2.0`
release:
	VERSION=$(VERSION) bash hack/release.sh

## e2e: the end-to-end suite on the local cluster (sudo make local-up first, or let it start one)
e2e:
	bash hack/e2e.sh

## e2e-original: coreos/etcd-operator v0.9.4 itself, built by hack/original/build.sh, runs a cluster on the
## local cluster, and its backups restore here (root; it replaces the cluster-wide CRDs while it runs)
e2e-original:
	E2E_ORIGINAL=1 bash hack/e2e.sh -run '^TestOriginalItself|^TestBackupsTheOriginalItself'

## e2e-cert-manager: clusters whose certificates cert-manager issues, on cert-manager v1.21.2 built from its Go module
## and run on the local cluster by `make cert-manager` (root; the cluster up)
e2e-cert-manager: cert-manager
	E2E_CERT_MANAGER=1 bash hack/e2e.sh -run '^TestCertManager'

## e2e-upgrade: the operators of the previous release (hack/previous-release), built from its commit and
## installed from its manifests, upgraded to this tree's while a cluster scales, under the checker (root;
## that release's operators install its CRDs cluster-wide while it runs, so it runs alone)
e2e-upgrade:
	E2E_PREVIOUS_RELEASE=1 bash hack/e2e.sh -run '^TestUpgradeFromThePreviousRelease'

## e2e-nodes: the node events (^TestNodes: members spread, a node stopped; with E2E_CHAOS=1 the long ones) on three nodes:
## adds two nodes to the local cluster (up.sh NODES=3), or starts one of three
e2e-nodes:
	NODES=3 bash hack/local-cluster/up.sh
	bash hack/e2e.sh

## chaos: the whole fault matrix, each scenario with the linearizability checker, and the tenant control plane's
## scenarios (root; CHAOS_ONLY=matrix|tenant; _output/chaos/results.json, tenant.json; docs/results/chaos.md)
chaos:
	bash hack/chaos.sh

## bench: the operator against the floor and the original, with many idle clusters, and under etcd's own benchmark tool
## against the floor, on the local cluster (hack/bench/run.sh, BENCH_ONLY=speed|scale|etcd; tables and JSON in _output/bench)
bench:
	bash hack/bench/run.sh

## bench-go: the Go benchmarks, COUNT=3 runs each (hack/bench/go.sh); the idle cluster's and etcd 3.6 beside 3.7 go to docs/results/backup-restore.md
bench-go:
	bash hack/bench/go.sh

## try: the local Kubernetes, the operator installed as users do, the example cluster serving (root)
try:
	bash hack/try.sh

## local-up / local-down: a real Kubernetes on this machine (root); one node, or NODES=3 for three
## nodes in zones a, b and c (hack/local-cluster/node.sh stops, loses, cuts off and drains them)
local-up:
	bash hack/local-cluster/up.sh

local-down:
	bash hack/local-cluster/down.sh

## cert-manager: cert-manager v1.21.2's controllers for SelfSigned and CA issuers on the local cluster, built from the
## module proxy (hack/cert-manager; root, the cluster up; docs/development/cert-manager.md)
cert-manager:
	bash hack/cert-manager/deploy.sh

clean:
	rm -rf _output
