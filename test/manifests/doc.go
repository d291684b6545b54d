// Package manifests tests what ships under example/ for platform teams: the
// monitoring kit (alert rules run through promtool, every metric it names
// exported by the code) and the Helm chart (helm lint and template, and the
// rendered objects against the plain manifests). The tools come from the Go
// module proxy through hack/tools.sh; `make unit` passes their paths in
// PROMTOOL and HELM.
package manifests
