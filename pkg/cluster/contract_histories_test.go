package cluster

import (
	"math/rand/v2"
	"slices"
)

// Random histories, the generators of TestSafetyContract and
// FuzzSafetyContract: a history drawn from bytes, the weights of the events
// it is made of, and the shrinking of one that breaks a rule to the
// shortest that still does.

// eventTable weighs the kinds of random histories: one byte picks one of
// its entries.
var eventTable = [32]eventKind{
	evTick, evTick, evTick, evConvert,
	evKubelet, evKubelet, evKubelet, evKubelet, evNodeDeleted,
	evCrash, evCrash, evCrash,
	evRecover, evRecover,
	evPodFails, evPodFails,
	evPodDeleted, evPodDeleted,
	evPodsGone, evPodsGone,
	evNodeLost, evNodeBack, evDataRefused, evPartition, evUnreachable,
	evOperatorRestart, evOperatorRestart,
	evStatusStore, evSpecSize, evSpecVersion, evAllPodsDeleted, evAddReplyLost,
}

// Histories from bytes: 4 bytes for the start, then 3 for each step (the
// event, the target with whether the pass is held, a parameter). The start:
// byte 0 the size, claims, disaster recovery and whether the status is
// stored; bytes 1 and 2 the initial members' lifetime restarts, then
// (byte 2, bits 2 to 4) whether coreos/etcd-operator made the cluster and
// whether it is to be converted, and (bits 5 to 7) how many rounds of calm
// a conversion starts with, two by two; byte 3 the operator's memory, a new
// cluster, the user's node bound and a start together.

const (
	historyHeader = 4
	maxSteps      = 80
)

var lifetimeChoices = [4]int32{0, 1, 4, 12}

func decodeHistory(data []byte) history {
	var hdr [historyHeader]byte
	copy(hdr[:], data)
	cfg := worldConfig{
		size:          []int{1, 3, 5}[int(hdr[0])%3],
		claims:        hdr[0]>>2&1 == 1,
		recovery:      hdr[0]>>3&1 == 1,
		fromBackup:    hdr[0]>>4&1 == 1,
		neverStored:   hdr[0]>>5 == 0,
		warm:          hdr[3]&1 == 1,
		fresh:         hdr[3]>>1&7 == 0,
		nodeLostAfter: hdr[3]>>4&1 == 1,
		together:      hdr[3]>>5&1 == 1,
	}
	// A quarter of the clusters that are not new were made by
	// coreos/etcd-operator; half of those are to be converted from the
	// start (evConvert sets or unsets it later).
	cfg.adopted = !cfg.fresh && hdr[2]>>2&3 == 3
	cfg.convert = cfg.adopted && hdr[2]>>4&1 == 1
	bits := uint16(hdr[1]) | uint16(hdr[2])<<8
	for i := range cfg.lifetimeRestarts {
		cfg.lifetimeRestarts[i] = lifetimeChoices[bits>>(2*i)&3]
	}
	h := history{start: cfg}
	if cfg.convert {
		// The faults meet a conversion at any stage: the history starts
		// with up to fourteen rounds of calm (the kubelet moves the pods
		// along, five seconds pass), three of which replace one member.
		for range 2 * (hdr[2] >> 5) {
			h.steps = append(h.steps, step{ev: evKubelet, idx: -1}, step{ev: evTick, idx: -1, param: 1})
		}
	}
	for rest := data[min(len(data), historyHeader):]; len(rest) >= 3 && len(h.steps) < maxSteps; rest = rest[3:] {
		h.steps = append(h.steps, step{ev: eventTable[rest[0]%32], idx: int(rest[1] % 32), held: rest[1] >= 224, param: rest[2]})
	}
	return h
}

// randomHistory is the bytes of a random history.
func randomHistory(rng *rand.Rand) []byte {
	n := historyHeader + 3*(6+rng.IntN(30))
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	return data
}

// resolved is the history with every step's target named, as played.
func (r *run) resolved() history {
	h := history{start: r.h.start, steps: slices.Clone(r.h.steps[:len(r.log)])}
	for i := range h.steps {
		h.steps[i].idx = -1
	}
	return h
}

// shrink removes steps, shortens waits and drops the month-old restarts as
// long as the history still breaks bucket, and returns the shortest run
// found, with its story.
func shrink(h history, bucket string, ignore func(violation) bool) *run {
	fails := func(h history) *run {
		if r := play(h, playOptions{until: bucket, ignore: ignore}); r.broke(bucket) >= 0 {
			return r
		}
		return nil
	}
	r := fails(h)
	if r == nil {
		return play(h, playOptions{ignore: ignore, story: true})
	}
	h = r.resolved()
	try := func(c history) bool {
		if r := fails(c); r != nil {
			h = r.resolved()
			return true
		}
		return false
	}
	for changed := true; changed; {
		changed = false
		for i := len(h.steps) - 1; i >= 0; i-- {
			if i < len(h.steps) && try(history{start: h.start, steps: slices.Delete(slices.Clone(h.steps), i, i+1)}) {
				changed = true
			}
		}
		for i := 0; i < len(h.steps); i++ {
			c := history{start: h.start, steps: slices.Clone(h.steps)}
			switch st := &c.steps[i]; {
			case st.ev == evTick && int(st.param)%len(tickDurations) > 0:
				st.param = byte(int(st.param)%len(tickDurations) - 1)
			case st.held:
				st.held = false
			default:
				continue
			}
			if try(c) {
				changed = true
			}
		}
		for i, n := range h.start.lifetimeRestarts {
			if n == 0 {
				continue
			}
			c := history{start: h.start, steps: h.steps}
			c.start.lifetimeRestarts[i] = 0
			if try(c) {
				changed = true
			}
		}
	}
	return play(h, playOptions{until: bucket, ignore: ignore, story: true})
}
