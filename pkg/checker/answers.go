package checker

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// answers tells which member of which cluster answers each of the run's
// connections, and logs each new one and each run of errors. A client reaches its cluster
// through one address (a Service), so which member is behind a connection
// shows only in the answers' headers; a connection that goes on failing, or
// answers for another cluster (a pod's address reused while a proxy still
// sends to it), would otherwise show only as missed events or a read-back
// that never ends, with nothing to say where the requests went.
type answers struct {
	mu  sync.Mutex
	log *logrus.Entry
	// cluster is the cluster the run began on, and members its members'
	// names by ID, read again when a member of it answers that it did not
	// list (a member added since).
	cluster uint64
	members map[uint64]string
	// asked are the members of the run's cluster it read the member list
	// for, once each.
	asked map[uint64]bool
	conns map[string]*connection
	// remotes name the address behind each client's answers and errors.
	remotes *remotes
}

// connection is what one of the run's connections was answered: the members
// that answered it (a client of several endpoints takes turns between them,
// so only a member's first answer is logged), and the run of errors it is in,
// if any, logged once with its length when it ends.
type connection struct {
	seen      map[string]bool
	failing   string
	repeats   int
	failSince time.Time
}

func newAnswers(log *logrus.Entry, rem *remotes) *answers {
	return &answers{log: log, members: map[uint64]string{}, asked: map[uint64]bool{}, conns: map[string]*connection{}, remotes: rem}
}

// learn reads the cluster's members through cli, to name them in the log.
func (a *answers) learn(ctx context.Context, cli *clientv3.Client) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cluster == 0 {
		a.cluster = resp.Header.ClusterId
		a.logf(logrus.InfoLevel, "the run begins on cluster %x, members %s", a.cluster, a.names(resp.Members))
	}
	if resp.Header.ClusterId != a.cluster {
		return
	}
	for _, m := range resp.Members {
		a.members[m.ID] = m.Name
	}
}

func (a *answers) names(ms []*etcdserverpb.Member) string {
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = fmt.Sprintf("%s=%x", m.Name, m.ID)
	}
	return strings.Join(names, ", ")
}

// unknownMember tells whether h comes from a member of the run's cluster
// that it has not named yet nor asked about.
func (a *answers) unknownMember(h *etcdserverpb.ResponseHeader) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, known := a.members[h.MemberId]
	if h.ClusterId != a.cluster || known || a.asked[h.MemberId] {
		return false
	}
	a.asked[h.MemberId] = true
	return true
}

// answered records an answer on conn with header h.
func (a *answers) answered(ctx context.Context, conn string, cli *clientv3.Client, h *etcdserverpb.ResponseHeader) {
	if h == nil || a == nil {
		return
	}
	if a.unknownMember(h) && cli != nil {
		a.learn(ctx, cli)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cluster == 0 {
		// The member list could not be read at the start: the first answer
		// says which cluster the run is on.
		a.cluster = h.ClusterId
	}
	text := fmt.Sprintf("answered by member %x", h.MemberId)
	if name, ok := a.members[h.MemberId]; ok && h.ClusterId == a.cluster {
		text = fmt.Sprintf("answered by member %s (%x)", name, h.MemberId)
	}
	level := logrus.InfoLevel
	if h.ClusterId != a.cluster {
		// A restore makes a new cluster too: said, not judged.
		text += fmt.Sprintf(" of cluster %x, not the cluster the run began on (%x)", h.ClusterId, a.cluster)
		level = logrus.WarnLevel
	}
	a.recordAnswer(conn, text+a.at(cli), level)
}

// failed records an error on conn, made through cli.
func (a *answers) failed(conn string, cli *clientv3.Client, err error) {
	if err == nil || a == nil {
		return
	}
	at := a.at(cli)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.recordFailure(conn, at+": "+err.Error())
}

// at says where cli's last request went, when that is known.
func (a *answers) at(cli *clientv3.Client) string {
	if addr := a.remotes.of(cli); addr != "" {
		return " at " + addr
	}
	return ""
}

// conn is the state of the connection named name; a.mu is held.
func (a *answers) conn(name string) *connection {
	c := a.conns[name]
	if c == nil {
		c = &connection{seen: map[string]bool{}}
		a.conns[name] = c
	}
	return c
}

// recordAnswer logs an answer on conn that is the first of its kind there,
// or the first after errors; a.mu is held.
func (a *answers) recordAnswer(name, text string, level logrus.Level) {
	c := a.conn(name)
	recovered := c.failing != ""
	a.endFailures(name, c)
	if recovered || !c.seen[text] {
		a.logf(level, "connection %s: %s", name, text)
	}
	c.seen[text] = true
}

// recordFailure logs an error on conn (text: where it was made, if known,
// then ": " and what it says) unless it is the error conn already failed
// with, which is only counted; a.mu is held.
func (a *answers) recordFailure(name, text string) {
	c := a.conn(name)
	if c.failing == text {
		c.repeats++
		return
	}
	a.endFailures(name, c)
	c.failing, c.failSince = text, time.Now()
	a.logf(logrus.InfoLevel, "connection %s: failed%s", name, text)
}

// endFailures logs how often conn failed again the same way, if it did.
func (a *answers) endFailures(name string, c *connection) {
	if c.repeats > 0 {
		a.logf(logrus.InfoLevel, "connection %s: failed the same way %d more time(s) since %s", name, c.repeats, c.failSince.Format(time.RFC3339))
	}
	c.failing, c.repeats = "", 0
}

// flush logs the runs of errors not ended yet, at the end of the run.
func (a *answers) flush() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(a.conns)) {
		a.endFailures(name, a.conns[name])
	}
}

func (a *answers) logf(level logrus.Level, format string, args ...any) {
	if a.log != nil {
		a.log.Logf(level, format, args...)
	}
}
