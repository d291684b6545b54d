package framework

// LinearFit is a least-squares line through the points: cost = Base +
// PerCluster × clusters, and what it projects.
type LinearFit struct {
	Unit       string  `json:"unit"`
	Base       float64 `json:"base"`
	PerCluster float64 `json:"perCluster"`
	At1000     float64 `json:"at1000"`
	At10000    float64 `json:"at10000"`
	// Goal is the bound per cluster the project set, in Unit.
	Goal float64 `json:"goalPerCluster"`
	// Fitted is false when there were fewer than two steps: no line.
	Fitted bool `json:"fitted"`
}

// Fit is the least-squares line through (xs, ys). One point gives no slope:
// the operator's fixed cost would be taken for a cost per cluster.
func Fit(unit string, xs, ys []float64, goal float64) LinearFit {
	l := LinearFit{Unit: unit, Goal: goal}
	n := float64(len(xs))
	if len(xs) < 2 {
		return l
	}
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	if d := n*sxx - sx*sx; d != 0 {
		l.PerCluster = (n*sxy - sx*sy) / d
	}
	// A cost does not fall as clusters are added: a negative slope is noise
	// around a flat line, which would project to less than the fixed cost.
	l.PerCluster = max(l.PerCluster, 0)
	l.Base = (sy - l.PerCluster*sx) / n
	l.At1000 = l.Base + 1000*l.PerCluster
	l.At10000 = l.Base + 10000*l.PerCluster
	l.Fitted = true
	return l
}
