package cluster

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The operator's safety contract — what it never does — checked
// (contract_rules_test.go) on random histories of the world of
// contract_world_test.go. A destructive step happens only on positive
// evidence read in the same pass, never on the absence of information.
// Each rule is judged against the world as it is when the pass acts, not
// against what the pass saw:
//
//	C1 A member is removed from etcd (remove dead member, remove member)
//	   only with the membership confirmed by etcd's leader in this pass,
//	   while etcd has a leader and the voters left keep a quorum running.
//	   A dead member whose claim holds its data is removed only when etcd
//	   refused the data (its log, a CORRUPT alarm) or when it is down after
//	   at least ladderRestarts restarts after failures within ladderWindow, or
//	   when its claim's volume could only be used on a node read as deleted in
//	   this pass (the data went with the node), or, under the user's
//	   spec.pod.nodeLostAfterSeconds, read as not answering for that long —
//	   the world counts those with their times. A failure is a pod that
//	   ended (Failed, evicted by the kubelet) or an etcd that exited; a
//	   container's lifetime restartCount, the restart of an upgrade in
//	   place, a pod deleted and a pod that never started are no failures.
//	   A member whose container restarts on a new image is not dead.
//	C2 A claim is deleted (stray claim, joiner) only with the membership
//	   confirmed by the leader in this pass, when etcd does not list its
//	   member, and never the claim of a member of a cluster that served that
//	   a new seed took the place of.
//	C3 A seed is made only while the cluster owns no claim and no pod.
//	C4 A new cluster is forced from a survivor only when etcd was read
//	   without error in this pass, etcd has no leader and no member reports
//	   one, the survivor answered with the highest raft index of those that
//	   answered, every member whose pod may still run (Running, on a node
//	   that does not answer, terminating) answered, etcd lost its leader at
//	   least the grace period ago, and the operator read it without a
//	   leader at least the grace period ago as well as now.
//	C5 A restore from a backup only while no member has a claim, nor a pod
//	   whose emptyDir holds its data.
//	C6 A seed is made again (reseed) only when the cluster never served:
//	   no member pod was ever Ready behind a leader.
//	C7 A pod is force-deleted only under the user's spec.pod.nodeLostAfter-
//	   Seconds, when it is being deleted on a node that has not answered for
//	   that long, and never while its etcd runs as a member; its member is
//	   confirmed down by etcd's leader in the same pass.
//	C8 Members started together are started again with a new token only
//	   when none of the pods and claims deleted holds data a quorum
//	   committed and the cluster never served; a member is made again from
//	   the plan without its data only if it never took part in a quorum,
//	   or no other member holds what one committed.
//	C9 While etcd has members coreos/etcd-operator v0.9.4 made and a pod
//	   of its layout is there (live or terminating), and spec.adoption.
//	   convert is not set, no member, pod or claim is changed: no member
//	   added, promoted or removed, no pod or claim created, deleted or
//	   patched; a pass only reads, waits, tells the adoption and writes the
//	   status (keepsAdopted).
//	C10 Under spec.adoption.convert, a member the original made (whose
//	   pod is still of its layout) is removed only while etcd has more
//	   voting members than spec.size, or once it is lost (no etcd runs it,
//	   its pod is gone or ended, and no claim holds its data), never while
//	   it leads; a member is
//	   added only while etcd has no more members than spec.size: one
//	   replacement at a time, added first. A member on a claim converted
//	   in place (its pod deleted, restarted on the claim) is taken down
//	   only while every other voting member runs, in a cluster of three
//	   voting members or more, and never while it leads; a member etcd
//	   refuses (its data, a CORRUPT alarm) is replaced as any other.
//	L1 A pod being deleted is not deleted twice more; and while another
//	   pod is stuck terminating (past its deletion deadline and
//	   terminatingGrace), a member with no pod whose claim holds its data is
//	   restarted in place within a minute and three passes, but in an
//	   adopted cluster (C9), which restarts no member.
//	L2 Every wait says what it waits for, and the passes do not wait for
//	   more than a minute with an empty status.reason.
//	L3 The status a pass leaves does not say Available True while etcd has
//	   no leader (no voter is then Ready).

// violation is a rule broken at a pass.
type violation struct {
	// rule is the contract's rule ("C1"); what the check within it, stable
	// across histories, so that violations group by it; shape, for waits,
	// the wait without its names and figures.
	rule, what, shape string
	msg               string
	// step is the step of the history at which it happened.
	step int
}

func (v violation) bucket() string { return v.rule + " " + v.what }

func (v violation) String() string { return fmt.Sprintf("%s (%s): %s", v.rule, v.what, v.msg) }

// stepLog is what one step of a history did, for the failure's story.
type stepLog struct {
	at         time.Duration
	event      string
	passed     bool
	read       bool
	saw        string
	decided    string
	truth      string
	violations []violation
}

// history is a world's start and its steps.
type history struct {
	start worldConfig
	steps []step
}

// playOptions say how far a history is played and what is kept of it.
type playOptions struct {
	// until ends the history at the first violation in that bucket, at
	// the first violation of any kind when "*", never when "".
	until string
	// ignore leaves out the violations it matches (rules being fixed).
	ignore func(violation) bool
	// story keeps what each pass saw and decided, for the failure's
	// message.
	story bool
}

// run is one history played on a world.
type run struct {
	h          history
	o          playOptions
	w          *world
	log        []stepLog
	violations []violation

	// waitingSince is when the passes started waiting with an empty
	// status.reason, zero otherwise; goneSince and gonePasses track each
	// member whose pod is gone and whose claim holds its data until it is
	// restarted in place; redeleted counts the deletions of pods already
	// being deleted.
	waitingSince time.Time
	goneSince    map[string]time.Time
	gonePasses   map[string]int
	redeleted    map[string]int
	passes       int
	// together counts the passes that decided each step of a start
	// together, to show the histories reach them.
	together map[actionKind]int
	// adoption is how far an adopted cluster's history went, to show the
	// histories reach adoption and conversion.
	adoption adoptionReach
}

// adoptionReach is how far a history of a cluster coreos/etcd-operator made
// went: its adoption told, spec.adoption.convert set at a pass, one of its
// members replaced by one of this layout, every one of them.
type adoptionReach struct {
	adopted, announced, convert, replaced, converted bool
}

// play runs a history.
func play(h history, o playOptions) *run {
	h.steps = slices.Clone(h.steps)
	r := &run{h: h, o: o, w: newWorld(h.start),
		goneSince: map[string]time.Time{}, gonePasses: map[string]int{}, redeleted: map[string]int{}}
	for i := range r.h.steps {
		st := &r.h.steps[i]
		l := stepLog{event: r.w.happen(st)}
		if st.ev == evOperatorRestart {
			// An operator starts with no memory: a wait it did not see
			// begin is told a minute after its start.
			r.waitingSince = time.Time{}
		}
		r.w.settle()
		if !st.held && !r.w.down && !r.w.restored {
			l.passed = true
			r.pass(i, &l)
		}
		l.at = r.w.now.Sub(testStart)
		r.log = append(r.log, l)
		if r.w.restored || r.reached() {
			break
		}
	}
	return r
}

// reached tells whether the history has broken the rule it was played for.
func (r *run) reached() bool {
	switch r.o.until {
	case "":
		return false
	case "*":
		return len(r.violations) > 0
	}
	return r.broke(r.o.until) >= 0
}

// quiet tells whether a check that breaks its rule on pass after pass can
// be skipped: the history broke it already and no story is told.
func (r *run) quiet(bucket string) bool { return !r.o.story && r.broke(bucket) >= 0 }

// broke is the step at which the history first broke bucket, -1 if never.
func (r *run) broke(bucket string) int {
	for _, v := range r.violations {
		if v.bucket() == bucket {
			return v.step
		}
	}
	return -1
}

// pass is one pass of the operator, as Cluster.pass runs it, with the
// contract checked on its decision and on the status it writes.
func (r *run) pass(i int, l *stepLog) {
	w := r.w
	r.passes++
	s := observeWorld(w, false)
	a := decide(s)
	if a.kind == actReadEtcd {
		l.read = true
		s = observeWorld(w, true)
		a = decide(s)
	}
	if r.o.story {
		l.saw, l.decided, l.truth = summarize(s), a.String(), w.truth()
	}
	switch a.kind {
	case actStartTogether, actResumeTogether, actRestartTogether:
		if r.together == nil {
			r.together = map[actionKind]int{}
		}
		r.together[a.kind]++
	}
	vs := r.checkDecision(s, a)
	original := w.members[a.member] != nil && w.members[a.member].original
	phase, err := w.act(s, a)
	w.settle()
	r.noteAdoption(a, original)
	w.writeStatus(s, phase, w.op.passProblems(s, nil, a, err))
	vs = append(vs, r.checkAfterPass(a)...)
	for _, v := range vs {
		if r.o.ignore == nil || !r.o.ignore(v) {
			v.step = i
			l.violations = append(l.violations, v)
			r.violations = append(r.violations, v)
		}
	}
}

// noteAdoption records how far the history took an adopted cluster: a told
// adoption, a pass under spec.adoption.convert, an original member removed
// under it, and every original member gone with members of this layout left.
func (r *run) noteAdoption(a action, original bool) {
	w := r.w
	if !r.h.start.adopted {
		return
	}
	ra := &r.adoption
	ra.adopted = true
	ra.announced = ra.announced || a.kind == actAnnounceAdoption
	ra.convert = ra.convert || w.convert
	removed := (a.kind == actRemoveMember || a.kind == actRemoveDeadMember) && w.members[a.member] == nil
	ra.replaced = ra.replaced || original && removed && w.convert
	ra.converted = ra.converted || ra.replaced && len(w.originals()) == 0 && len(w.members) > 0
}

var (
	contractHistories = flag.Int("contract.histories", 24000, "how many random histories TestSafetyContract plays")
	contractSeed      = flag.Uint64("contract.seed", 2025, "the seed of TestSafetyContract's random histories")
)

var contractIgnore = flag.String("contract.ignore", "", "rules (C1,L2) or buckets of the safety contract not to report, comma-separated: to hunt for other violations while these are being fixed")

// ignoredRules reads -contract.ignore.
func ignoredRules() func(violation) bool {
	if *contractIgnore == "" {
		return nil
	}
	var skip []string
	for _, s := range strings.Split(*contractIgnore, ",") {
		if s = strings.TrimSpace(s); s != "" {
			skip = append(skip, s)
		}
	}
	return func(v violation) bool {
		return slices.Contains(skip, v.rule) || slices.Contains(skip, v.bucket())
	}
}

// TestSafetyContract plays random histories, the same on every run, and
// reports each rule of the contract they break with the shortest history
// that breaks it, shrunk.
func TestSafetyContract(t *testing.T) {
	histories := *contractHistories
	if testing.Short() {
		histories /= 10
	}
	ignore := ignoredRules()
	type found struct {
		h     history
		steps int
	}
	type result struct {
		steps, passes int
		broke         map[string]found
		shapes        map[string]string
		together      map[actionKind]int
		adoption      adoptionReach
	}
	results := make([]result, histories)
	start := time.Now()
	var wg sync.WaitGroup
	// One core is left to the other packages' tests, which go test runs
	// beside this one: some judge etcd's answers on time.
	workers := max(1, runtime.GOMAXPROCS(0)-1)
	for wk := range workers {
		wg.Go(func() {
			for i := wk; i < histories; i += workers {
				r := play(decodeHistory(randomHistory(rand.New(rand.NewPCG(*contractSeed, uint64(i))))), playOptions{ignore: ignore})
				res := result{steps: len(r.log), passes: r.passes, broke: map[string]found{}, shapes: map[string]string{}, together: r.together, adoption: r.adoption}
				for _, v := range r.violations {
					if _, ok := res.broke[v.bucket()]; !ok {
						h := r.resolved()
						h.steps = h.steps[:v.step+1]
						res.broke[v.bucket()] = found{h: h, steps: v.step + 1}
					}
					if v.shape != "" {
						res.shapes[v.shape] = v.bucket()
					}
				}
				results[i] = res
			}
		})
	}
	wg.Wait()
	took := time.Since(start)

	steps, passes := 0, 0
	together := map[actionKind]int{}
	var adopted, announced, convert, replaced, converted int
	shortest := map[string]found{}
	count := map[string]int{}
	shapes := map[string]map[string]int{}
	for _, res := range results {
		steps += res.steps
		passes += res.passes
		for k, n := range res.together {
			together[k] += n
		}
		for _, c := range []struct {
			reached bool
			n       *int
		}{{res.adoption.adopted, &adopted}, {res.adoption.announced, &announced}, {res.adoption.convert, &convert},
			{res.adoption.replaced, &replaced}, {res.adoption.converted, &converted}} {
			if c.reached {
				*c.n++
			}
		}
		for b, f := range res.broke {
			count[b]++
			if old, ok := shortest[b]; !ok || f.steps < old.steps {
				shortest[b] = f
			}
		}
		for shape, b := range res.shapes {
			if shapes[b] == nil {
				shapes[b] = map[string]int{}
			}
			shapes[b][shape]++
		}
	}
	t.Logf("%d histories, %d steps, %d passes in %v on %d goroutines: %.0f histories/s, %.0f passes/s",
		histories, steps, passes, took.Round(time.Millisecond), workers, float64(histories)/took.Seconds(), float64(passes)/took.Seconds())
	t.Logf("members started together: %d starts, %d resumed, %d started again",
		together[actStartTogether], together[actResumeTogether], together[actRestartTogether])
	t.Logf("clusters coreos/etcd-operator made: %d histories, %d adoptions told, %d under spec.adoption.convert, %d with an original member replaced, %d converted to the last",
		adopted, announced, convert, replaced, converted)
	var summary []string
	for _, b := range sortedKeys(shortest) {
		summary = append(summary, fmt.Sprintf("%s (%d)", b, count[b]))
		r := shrink(shortest[b].h, b, ignore)
		msg := fmt.Sprintf("%s — broken in %d of %d histories; the shortest, shrunk to %d steps:\n%s", b, count[b], histories, len(r.log), r.story())
		if ss := shapes[b]; len(ss) > 0 {
			msg += "the waits it was found on, with the histories they were found in:\n"
			for _, shape := range sortedKeys(ss) {
				msg += fmt.Sprintf("  %5d  %s\n", ss[shape], shape)
			}
		}
		t.Error(msg)
	}
	t.Logf("contract: %d histories, %d rules broken: %s", histories, len(summary), strings.Join(summary, "; "))
}

// FuzzSafetyContract is the contract on histories the fuzzer makes: `make
// fuzz` runs it, and the fuzzer shrinks what fails; the failure tells the
// history as a story. -contract.ignore leaves out the rules being fixed.
// The seeds are histories of a cluster that only waits and heals.
func FuzzSafetyContract(f *testing.F) {
	for _, start := range []byte{0x25, 0x24, 0x2d, 0x3d, 0x26} {
		f.Add([]byte{start, 0, 0, 0, 4, 0, 3, 4, 0, 0, 5, 0, 7})
	}
	// Clusters coreos/etcd-operator made, on emptyDir and on claims,
	// converted and not.
	for _, adopted := range []byte{0x0c, 0x1c} {
		for _, start := range []byte{0x25, 0x21} {
			f.Add([]byte{start, 0, adopted, 0x03, 4, 0, 3, 4, 0, 0, 5, 0, 7})
		}
	}
	ignore := ignoredRules()
	f.Fuzz(func(t *testing.T, data []byte) {
		r := play(decodeHistory(data), playOptions{until: "*", ignore: ignore, story: true})
		if len(r.violations) > 0 {
			t.Fatalf("%s\n%s", r.violations[0], r.story())
		}
	})
}
