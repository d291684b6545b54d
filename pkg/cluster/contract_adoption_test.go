package cluster

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestContractAdoptedClusters are histories of clusters that
// coreos/etcd-operator v0.9.4 made, told as sentences: each must keep the
// contract (C9 and C10 above all), and end with the members it names the
// original's, or none of them when the cluster is converted.
func TestContractAdoptedClusters(t *testing.T) {
	adopted := func(size int, claims, convert bool) worldConfig {
		return worldConfig{size: size, claims: claims, adopted: true, convert: convert, warm: true}
	}
	// calm is a cluster left alone: the kubelet moves the pods along
	// between passes a few seconds apart.
	calm := func(n int) []step {
		var out []step
		for range n {
			out = append(out, kubelet(), tick(5*time.Second))
		}
		return out
	}
	tests := []struct {
		name  string
		start worldConfig
		steps []step
		// originals are the members of etcd the original made at the end;
		// size, how many members etcd has then.
		originals []string
		size      int
	}{
		{
			name:      "an adopted member whose etcd exits is not restarted or replaced while the cluster is not converted",
			start:     adopted(3, false, false),
			steps:     slices.Concat([]step{crash(memberB)}, calm(6), []step{tick(6 * time.Minute), tick(time.Hour)}),
			originals: []string{memberA, memberB, memberC},
			size:      3,
		},
		{
			name:      "an adopted cluster whose spec asks for five members is not resized while it is not converted",
			start:     adopted(3, true, false),
			steps:     slices.Concat([]step{{ev: evSpecSize, idx: -1, param: 2}}, calm(6)),
			originals: []string{memberA, memberB, memberC},
			size:      3,
		},
		{
			name:  "an adopted cluster on emptyDir is converted one member at a time, the leader last",
			start: adopted(3, false, true),
			steps: calm(40),
			size:  3,
		},
		{
			name:  "an adopted cluster on claims is converted in place one member at a time, the leader last",
			start: adopted(3, true, true),
			steps: calm(40),
			size:  3,
		},
		{
			name:      "an adopted member whose pod is deleted stays lost while the cluster is not converted",
			start:     adopted(3, false, false),
			steps:     slices.Concat([]step{deletePod(memberB)}, calm(10), []step{tick(time.Hour)}, calm(2)),
			originals: []string{memberA, memberB, memberC},
			size:      3,
		},
		{
			name:  "an adopted member lost with its emptyDir is replaced first when the conversion is asked, then the others converted",
			start: adopted(3, false, false),
			steps: slices.Concat([]step{deletePod(memberB)}, calm(4), []step{{ev: evConvert, idx: -1}}, calm(40)),
			size:  3,
		},
		{
			name:  "an adopted member lost from its claim is restarted on it by the conversion, then the others converted in place",
			start: adopted(3, true, false),
			steps: slices.Concat([]step{deletePod(memberB)}, calm(4), []step{{ev: evConvert, idx: -1}}, calm(30)),
			size:  3,
		},
		{
			name:      "a conversion taken back after its first replacement stops there: the members left are the original's",
			start:     adopted(3, false, false),
			steps:     slices.Concat([]step{{ev: evConvert, idx: -1}}, calm(3), []step{{ev: evConvert, idx: -1}}, calm(20)),
			originals: []string{memberA, memberC},
			size:      3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := play(history{start: tt.start, steps: tt.steps}, playOptions{story: true})
			var broken []string
			for _, v := range r.violations {
				if !slices.Contains(broken, v.bucket()) {
					broken = append(broken, v.bucket())
				}
			}
			if len(broken) > 0 {
				t.Errorf("the history breaks %s:\n%s", strings.Join(broken, "; "), r.story())
			}
			if got := r.w.originals(); !slices.Equal(got, tt.originals) || len(r.w.members) != tt.size {
				t.Errorf("etcd ends with members %v, the original's %v; want %d members, the original's %v:\n%s", sortedKeys(r.w.members), got, tt.size, tt.originals, r.story())
			}
		})
	}
}
