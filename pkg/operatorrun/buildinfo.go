package operatorrun

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
)

// BuildInfoMetric is the name of the gauge that says which build runs. The
// three operators share it, as they share one release: a query over it lists
// every operator's version, and the job label tells them apart.
const BuildInfoMetric = "etcd_operator_build_info"

// NewBuildInfo is the gauge BuildInfoMetric, always 1, whose labels carry the
// version and commit stamped at build time (make build, the image and the
// release stamp them from git) and the Go release that compiled the binary:
// joined on it, a dashboard or an alert shows which build each series comes
// from, for example during a rolling upgrade of the operator.
func NewBuildInfo(version, gitSHA string) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: BuildInfoMetric,
		Help: "Always 1; the labels say which version and commit of the operator runs, and which Go compiled it.",
		ConstLabels: prometheus.Labels{
			"version":    version,
			"git_sha":    gitSHA,
			"go_version": runtime.Version(),
		},
	}, func() float64 { return 1 })
}
