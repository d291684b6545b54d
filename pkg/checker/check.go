package checker

import (
	"fmt"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// Result is the verdict on one history, the line the e2e suite and `make chaos`
// read.
type Result struct {
	Scenario string `json:"scenario,omitempty"`
	// Ops attempted (register operations and appends, not the read-back).
	Ops int `json:"ops"`
	// Acked: writes and reads the server answered.
	Acked int `json:"acked"`
	// Failed: operations that certainly changed nothing: reads that got an
	// error, writes etcd refused (NOSPACE).
	Failed int `json:"failed"`
	// Indeterminate: writes that got an error or timed out; maybe applied.
	Indeterminate int `json:"indeterminate"`
	// Linearizable is porcupine's verdict: "yes", "no", or "unknown" when the
	// search ran out of time.
	Linearizable string `json:"linearizable"`
	// AckedLost: acknowledged appends missing at the end. Must be 0.
	AckedLost int `json:"ackedLost"`
	// LongestUnavailableSeconds: the longest time during the workload in which no
	// operation succeeded.
	LongestUnavailableSeconds float64 `json:"longestUnavailableSeconds"`
	// WatchMissed: acknowledged writes a watch never delivered; WatchOutOfOrder:
	// events out of revision order. Both must be 0.
	WatchMissed     int `json:"watchMissed"`
	WatchOutOfOrder int `json:"watchOutOfOrder"`
	// WatchCompacted: acknowledged writes below a compaction the watch had to
	// skip when it resumed; not a loss (the read-back counts those).
	WatchCompacted int `json:"watchCompacted,omitempty"`
	// WatchRestarts: watches made again from their last event after a stall.
	WatchRestarts int `json:"watchRestarts,omitempty"`
	// ReadBackErr: the cluster did not serve the final read-back.
	ReadBackErr string `json:"readBackErr,omitempty"`
	// Visualization: porcupine's HTML of a history that is not linearizable.
	Visualization string `json:"visualization,omitempty"`
	// CheckSeconds: how long porcupine took.
	CheckSeconds float64 `json:"checkSeconds"`
	// Errors: the most frequent errors the operations got, by message.
	Errors []ErrorCount `json:"errors,omitempty"`
}

// ErrorCount is how many operations got one error message.
type ErrorCount struct {
	Message string `json:"message"`
	Count   int    `json:"count"`
}

// maxErrors is how many distinct error messages a result keeps.
const maxErrors = 5

// topErrors are the most frequent of counts, the most frequent first.
func topErrors(counts map[string]int) []ErrorCount {
	var out []ErrorCount
	for msg, n := range counts {
		out = append(out, ErrorCount{Message: msg, Count: n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Message < out[j].Message
	})
	return out[:min(len(out), maxErrors)]
}

// Passed: linearizable, nothing acknowledged lost or missed by the watch, and the
// cluster answered the read-back.
func (r Result) Passed() bool {
	return r.Linearizable == "yes" && r.AckedLost == 0 && r.ReadBackErr == "" && r.WatchMissed == 0 && r.WatchOutOfOrder == 0
}

func (r Result) String() string {
	s := fmt.Sprintf("ops=%d acked=%d failed=%d indeterminate=%d linearizable=%s ackedLost=%d watchMissed=%d watchOutOfOrder=%d longestUnavailable=%.1fs",
		r.Ops, r.Acked, r.Failed, r.Indeterminate, r.Linearizable, r.AckedLost, r.WatchMissed, r.WatchOutOfOrder, r.LongestUnavailableSeconds)
	if r.WatchCompacted > 0 {
		s += fmt.Sprintf(" watchCompacted=%d", r.WatchCompacted)
	}
	if r.WatchRestarts > 0 {
		s += fmt.Sprintf(" watchRestarts=%d", r.WatchRestarts)
	}
	if r.Visualization != "" {
		s += " visualization=" + r.Visualization
	}
	for _, e := range r.Errors {
		s += fmt.Sprintf(" error[%q]=%d", e.Message, e.Count)
	}
	return s
}

// CheckOptions bound the check.
type CheckOptions struct {
	// Timeout of porcupine's search; 0 is no bound.
	Timeout time.Duration
	// VisualizationPath, if set, receives porcupine's HTML when the history is not
	// linearizable.
	VisualizationPath string
}

// Check judges a history.
func Check(h *History, opts CheckOptions) (Result, error) {
	var r Result
	var okReturns []int64
	for _, op := range h.Ops {
		if op.Call > h.End { // the read-back
			continue
		}
		r.Ops++
		switch op.Result {
		case OK:
			r.Acked++
			okReturns = append(okReturns, op.Return)
		case Failed:
			r.Failed++
		case Unknown:
			r.Indeterminate++
		}
	}
	r.Ops += len(h.Appended) + h.AppendsUnknown + h.AppendsFailed
	r.Acked += len(h.Appended)
	r.Indeterminate += h.AppendsUnknown
	r.Failed += h.AppendsFailed
	r.LongestUnavailableSeconds = longestGap(okReturns, h.Start, h.End).Seconds()

	present := make(map[string]bool, len(h.Present))
	for _, k := range h.Present {
		present[k] = true
	}
	for _, k := range h.Appended {
		if !present[k] {
			r.AckedLost++
		}
	}
	r.ReadBackErr = h.ReadBackErr
	r.WatchMissed, r.WatchOutOfOrder, r.WatchCompacted = h.WatchMissed, h.WatchOutOfOrder, h.WatchCompacted
	r.WatchRestarts = h.WatchRestarts
	r.Errors = topErrors(h.Errors)

	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(kvModel, operations(h.Ops), opts.Timeout)
	r.CheckSeconds = time.Since(start).Seconds()
	switch res {
	case porcupine.Ok:
		r.Linearizable = "yes"
	case porcupine.Illegal:
		r.Linearizable = "no"
	default:
		r.Linearizable = "unknown"
	}
	if res == porcupine.Illegal && opts.VisualizationPath != "" {
		if err := porcupine.VisualizePath(kvModel, info, opts.VisualizationPath); err != nil {
			return r, fmt.Errorf("write the visualization: %w", err)
		}
		r.Visualization = opts.VisualizationPath
	}
	return r, nil
}

// longestGap is the longest interval within [start, end] that holds no time of
// returns.
func longestGap(returns []int64, start, end int64) time.Duration {
	sort.Slice(returns, func(i, j int) bool { return returns[i] < returns[j] })
	prev, gap := start, int64(0)
	for _, t := range returns {
		if t > end {
			t = end
		}
		gap = max(gap, t-prev)
		prev = max(prev, t)
	}
	gap = max(gap, end-prev)
	return time.Duration(gap)
}
