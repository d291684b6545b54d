package framework

import (
	"math"
	"testing"
)

func TestFit(t *testing.T) {
	for _, tc := range []struct {
		name             string
		xs, ys           []float64
		base, perCluster float64
		at1000           float64
		fitted           bool
	}{
		{name: "a line through the steps gives its slope and projection",
			xs: []float64{10, 50, 100}, ys: []float64{51, 55, 60}, base: 50.0, perCluster: 0.1, at1000: 150, fitted: true},
		{name: "a flat cost has no cost per cluster",
			xs: []float64{10, 50, 80}, ys: []float64{30, 30, 30}, base: 30, perCluster: 0, at1000: 30, fitted: true},
		{name: "a falling cost is noise around a flat line, not a negative cost",
			xs: []float64{10, 50, 80}, ys: []float64{32, 30, 31}, base: 31, perCluster: 0, at1000: 31, fitted: true},
		{name: "one step gives no line: its cost is mostly the fixed one",
			xs: []float64{10}, ys: []float64{51}},
		{name: "no step gives no line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Fit("MiB", tc.xs, tc.ys, 0.1)
			near := func(a, b float64) bool { return math.Abs(a-b) < 0.05 }
			if got.Fitted != tc.fitted || !near(got.Base, tc.base) || !near(got.PerCluster, tc.perCluster) || !near(got.At1000, tc.at1000) {
				t.Errorf("Fit(%v, %v) = %+v, want base %g, per cluster %g, at 1000 %g, fitted %v",
					tc.xs, tc.ys, got, tc.base, tc.perCluster, tc.at1000, tc.fitted)
			}
		})
	}
}
