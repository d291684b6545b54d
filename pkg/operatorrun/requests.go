package operatorrun

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// requestCounter counts the operator's requests to the Kubernetes API by verb
// and resource, so that its load on the apiserver can be watched (and compared
// with the original's, which cost a LIST per cluster every 8 s).
type requestCounter struct {
	next  http.RoundTripper
	count *prometheus.CounterVec
}

func newRequestCounter(binary string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: strings.ReplaceAll(binary, "-", "_") + "_kubernetes_requests_total",
		Help: "Requests to the Kubernetes API by verb and resource; a watch counts once, when it is opened.",
	}, []string{"verb", "resource"})
}

func (r requestCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	verb, resource := requestKind(req.Method, req.URL)
	r.count.WithLabelValues(verb, resource).Inc()
	return r.next.RoundTrip(req)
}

// requestKind names a request the way the apiserver's audit log does: verb
// (get, list, watch, create, update, patch, delete, deletecollection) and
// resource, with its subresource after a slash ("etcdclusters/status").
// Paths that are not resources (discovery, /version) are "other".
func requestKind(method string, u *url.URL) (verb, resource string) {
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	var rest []string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		rest = parts[3:]
	}
	if len(rest) >= 3 && rest[0] == "namespaces" {
		rest = rest[2:]
	}
	named := len(rest) >= 2
	if len(rest) == 0 {
		resource = "other"
	} else {
		resource = rest[0]
		if len(rest) >= 3 {
			resource += "/" + rest[2]
		}
	}
	switch method {
	case http.MethodGet:
		switch {
		case u.Query().Get("watch") == "true" || u.Query().Get("watch") == "1":
			verb = "watch"
		case named || resource == "other":
			verb = "get"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
		if !named {
			verb = "deletecollection"
		}
	default:
		verb = strings.ToLower(method)
	}
	return verb, resource
}
