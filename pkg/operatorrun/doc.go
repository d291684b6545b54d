// Package operatorrun is what the three operator binaries share at startup: their
// identity from the downward API, Kubernetes clients, the HTTP server for probes and
// metrics, event recording, and leader election on a Lease or, under the
// original's RBAC, on its Endpoints lock.
package operatorrun
