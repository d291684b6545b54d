// Package checker proves an etcd endpoint loses nothing a client was told was
// written: a workload of concurrent clients records every operation with its call
// and return time, and the history is checked for linearizability against a
// key-value model with porcupine, the checker etcd's own robustness tests use.
package checker

import (
	"fmt"

	"github.com/anishathalye/porcupine"
)

// Kind is what an operation did.
type Kind string

const (
	// Get reads one key (a linearizable range, etcd's default).
	Get Kind = "get"
	// Put writes one key of the register key space.
	Put Kind = "put"
	// CAS writes Value only if the key holds Expect (a transaction comparing the
	// value), the compare-and-set clients build locks and leader election on.
	CAS Kind = "cas"
)

// Outcome is what the client learned of an operation.
type Outcome string

const (
	// OK: the server answered.
	OK Outcome = "ok"
	// Failed: a read that got an error, or a write etcd refused (NOSPACE); it
	// changed nothing and is left out.
	Failed Outcome = "failed"
	// Unknown: a write that got an error or timed out. The server may have applied
	// it, then or at any later time, or never: the history keeps it with no return
	// time, which lets porcupine place it anywhere after its call, or nowhere.
	Unknown Outcome = "unknown"
)

// Op is one operation of the history. Times are nanoseconds since the workload
// started, on one monotonic clock.
type Op struct {
	Client int     `json:"client"`
	Kind   Kind    `json:"kind"`
	Key    string  `json:"key"`
	Value  string  `json:"value,omitempty"`  // put/cas: the value written; get: the value read
	Expect string  `json:"expect,omitempty"` // cas: the value compared with
	Found  bool    `json:"found,omitempty"`  // get: the key existed
	OK     bool    `json:"ok,omitempty"`     // cas: the comparison held
	Call   int64   `json:"call"`
	Return int64   `json:"return"`
	Result Outcome `json:"result"`
}

// state is one key's value; absent is the key never written.
type state struct {
	value  string
	exists bool
}

type input struct {
	kind          Kind
	value, expect string
}

type output struct {
	value   string
	found   bool
	ok      bool
	unknown bool
}

// kvModel is a register per key: operations on different keys are independent, so
// the history is checked key by key (porcupine's partitions), which keeps the
// search small.
var kvModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Metadata.(string)
			if _, seen := byKey[k]; !seen {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() interface{} { return state{} },
	Step: func(s, in, out interface{}) (bool, interface{}) {
		st, i, o := s.(state), in.(input), out.(output)
		switch i.kind {
		case Get:
			return o.found == st.exists && o.value == st.value, st
		case Put:
			// A put always succeeds once applied; an unknown one is only placed
			// where it was applied (porcupine may also place it after everything).
			return true, state{value: i.value, exists: true}
		case CAS:
			holds := st.exists && st.value == i.expect
			next := st
			if holds {
				next = state{value: i.value, exists: true}
			}
			// An unknown CAS did whatever the state at its place decides.
			return o.unknown || o.ok == holds, next
		}
		return false, st
	},
	Equal: func(a, b interface{}) bool { return a.(state) == b.(state) },
	DescribeOperation: func(in, out interface{}) string {
		i, o := in.(input), out.(output)
		switch i.kind {
		case Get:
			if !o.found {
				return "get() -> none"
			}
			return fmt.Sprintf("get() -> %q", o.value)
		case Put:
			if o.unknown {
				return fmt.Sprintf("put(%q) -> ?", i.value)
			}
			return fmt.Sprintf("put(%q)", i.value)
		case CAS:
			res := fmt.Sprint(o.ok)
			if o.unknown {
				res = "?"
			}
			return fmt.Sprintf("cas(%q -> %q) -> %s", i.expect, i.value, res)
		}
		return string(i.kind)
	},
	DescribeState: func(s interface{}) string {
		st := s.(state)
		if !st.exists {
			return "none"
		}
		return fmt.Sprintf("%q", st.value)
	},
	DescribeOperationMetadata: func(m interface{}) string { return fmt.Sprint(m) },
}

// operations turns a history into porcupine's operations: failed reads are left
// out, and writes of unknown outcome get a return time after every other event.
func operations(ops []Op) []porcupine.Operation {
	var end int64
	for _, op := range ops {
		end = max(end, op.Return, op.Call)
	}
	out := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		if op.Result == Failed {
			continue
		}
		o := output{value: op.Value, found: op.Found, ok: op.OK, unknown: op.Result == Unknown}
		ret := op.Return
		if op.Result == Unknown {
			ret = end + 1
		}
		in := input{kind: op.Kind, value: op.Value, expect: op.Expect}
		if op.Kind == Get {
			in.value = ""
		}
		out = append(out, porcupine.Operation{
			ClientId: op.Client, Input: in, Output: o, Call: op.Call, Return: ret, Metadata: op.Key,
		})
	}
	return out
}
