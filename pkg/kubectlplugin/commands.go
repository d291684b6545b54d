package kubectlplugin

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/maintenance"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
)

// leaderMoveTimeout bounds the wait for a new leader after MoveLeader.
const leaderMoveTimeout = 15 * time.Second

// Status prints the cluster's members (role, version, database size and in
// use, alarms), its alarms and its latest successful backup.
func (p *Plugin) Status(ctx context.Context, w io.Writer, namespace, name string) error {
	return p.StatusAs(ctx, w, namespace, name, "")
}

// StatusAs prints the status as a table (output ""), a table with the
// members' raft progress and revision ("wide"), or as "json" or "yaml".
func (p *Plugin) StatusAs(ctx context.Context, w io.Writer, namespace, name, output string) error {
	switch output {
	case "", "wide", "json", "yaml":
	default:
		return fmt.Errorf("--output %q: status prints wide, json or yaml", output)
	}
	s, err := p.open(ctx, namespace, name)
	if err != nil {
		return err
	}
	defer s.close()
	h := s.health()
	c := s.cluster

	r := StatusReport{Cluster: c.Name, Namespace: c.Namespace, Phase: string(c.Status.Phase),
		Size: len(s.members) + len(s.unreachable), SpecSize: c.Spec.Size, Unreachable: s.unreachable,
		LastBackup: p.lastBackup(ctx, c)}
	if m := s.byID(h.LeaderID); m != nil {
		r.Leader = m.pod
	}
	for _, a := range h.Alarms {
		who := fmt.Sprintf("%x", a.MemberID)
		if m := s.byID(a.MemberID); m != nil {
			who = m.pod
		}
		r.Alarms = append(r.Alarms, a.Type+" on "+who)
	}
	for _, m := range h.Members {
		mr := MemberReport{Name: m.Name}
		if m.Err != nil {
			mr.Role, mr.Error = string(api.MemberRoleUnknown), m.Err.Error()
			r.Members = append(r.Members, mr)
			continue
		}
		mr.ID, mr.Role, mr.Version = fmt.Sprintf("%x", m.ID), string(role(m, h.LeaderID)), m.Version
		mr.DBSize, mr.DBSizeInUse = m.DBSize, m.DBSizeInUse
		mr.RaftTerm, mr.RaftIndex, mr.RaftAppliedIndex, mr.Revision = m.RaftTerm, m.RaftIndex, m.RaftAppliedIndex, m.Revision
		for _, a := range h.Alarms {
			if a.MemberID == m.ID {
				mr.Alarms = append(mr.Alarms, a.Type)
			}
		}
		r.Members = append(r.Members, mr)
	}
	if output == "json" || output == "yaml" {
		return printDocument(w, r, output)
	}
	return r.table(w, output == "wide")
}

// StatusReport is what `kubectl etcd status` shows, and prints with -o
// json or yaml.
type StatusReport struct {
	Cluster     string         `json:"cluster"`
	Namespace   string         `json:"namespace"`
	Phase       string         `json:"phase"`
	Size        int            `json:"size"`
	SpecSize    int            `json:"specSize"`
	Leader      string         `json:"leader,omitempty"`
	Alarms      []string       `json:"alarms,omitempty"`
	LastBackup  string         `json:"lastBackup"`
	Unreachable []string       `json:"unreachable,omitempty"`
	Members     []MemberReport `json:"members"`
}

// MemberReport is one member in a StatusReport.
type MemberReport struct {
	Name             string   `json:"name"`
	ID               string   `json:"id,omitempty"`
	Role             string   `json:"role"`
	Version          string   `json:"version,omitempty"`
	DBSize           int64    `json:"dbSize,omitempty"`
	DBSizeInUse      int64    `json:"dbSizeInUse,omitempty"`
	Alarms           []string `json:"alarms,omitempty"`
	RaftTerm         uint64   `json:"raftTerm,omitempty"`
	RaftIndex        uint64   `json:"raftIndex,omitempty"`
	RaftAppliedIndex uint64   `json:"raftAppliedIndex,omitempty"`
	Revision         int64    `json:"revision,omitempty"`
	// Error is why the member did not answer.
	Error string `json:"error,omitempty"`
}

func (r StatusReport) table(w io.Writer, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Cluster:\t%s/%s\n", r.Namespace, r.Cluster)
	fmt.Fprintf(tw, "Phase:\t%s\n", orDash(r.Phase))
	fmt.Fprintf(tw, "Size:\t%d (spec %d)\n", r.Size, r.SpecSize)
	leader := r.Leader
	if leader == "" {
		leader = "none agreed"
	}
	fmt.Fprintf(tw, "Leader:\t%s\n", leader)
	alarms := "none"
	if len(r.Alarms) > 0 {
		alarms = strings.Join(r.Alarms, ", ")
	}
	fmt.Fprintf(tw, "Alarms:\t%s\n", alarms)
	fmt.Fprintf(tw, "Last backup:\t%s\n", r.LastBackup)
	if len(r.Unreachable) > 0 {
		fmt.Fprintf(tw, "Unreachable:\t%s\n", strings.Join(r.Unreachable, ", "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)

	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := "MEMBER\tID\tROLE\tVERSION\tDB SIZE\tIN USE\tALARMS"
	if wide {
		header += "\tRAFT TERM\tRAFT INDEX\tAPPLIED\tREVISION"
	}
	fmt.Fprintln(tw, header)
	for _, m := range r.Members {
		if m.Error != "" {
			line := fmt.Sprintf("%s\t-\t%s\t-\t-\t-\t%s", m.Name, m.Role, m.Error)
			if wide {
				line += "\t-\t-\t-\t-"
			}
			fmt.Fprintln(tw, line)
			continue
		}
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s", m.Name, m.ID, m.Role, m.Version,
			maintenance.HumanBytes(m.DBSize), fmt.Sprintf("%s (%d%%)", maintenance.HumanBytes(m.DBSizeInUse), percent(m.DBSizeInUse, m.DBSize)),
			orDash(strings.Join(m.Alarms, ",")))
		if wide {
			line += fmt.Sprintf("\t%d\t%d\t%d\t%d", m.RaftTerm, m.RaftIndex, m.RaftAppliedIndex, m.Revision)
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

// Defragment defragments one member (memberName), or every member when it
// is empty: followers first, then the leader after moving leadership away.
func (p *Plugin) Defragment(ctx context.Context, w io.Writer, namespace, name, memberName string) error {
	s, err := p.open(ctx, namespace, name)
	if err != nil {
		return err
	}
	defer s.close()
	if err := s.allVotersAnswer(); err != nil {
		return fmt.Errorf("defragmentation pauses a member, so every member must be up first: %w", err)
	}
	var order []string
	if memberName != "" {
		if s.byName(memberName) == nil {
			return fmt.Errorf("%s: %w", memberName, errNoMember)
		}
		order = []string{memberName}
	} else {
		lead, err := s.leader()
		if err != nil {
			return err
		}
		for _, m := range s.members {
			if m != lead {
				order = append(order, m.pod)
			}
		}
		order = append(order, lead.pod)
	}
	for _, pod := range order {
		m := s.byName(pod)
		if lead, err := s.leader(); err == nil && lead == m && len(s.members) > 1 {
			if err := p.handOff(ctx, w, s, ""); err != nil {
				return fmt.Errorf("before defragmenting the leader %s: %w", pod, err)
			}
		}
		before := m.health.DBSize
		if err := etcdutil.Defragment(ctx, m.cfg, m.endpoint); err != nil {
			return err
		}
		s.refresh(ctx)
		fmt.Fprintf(w, "defragmented %s: %s -> %s\n", pod, maintenance.HumanBytes(before), maintenance.HumanBytes(m.health.DBSize))
	}
	return nil
}

// MoveLeader hands leadership to member to, or to the most caught-up
// healthy follower when to is empty.
func (p *Plugin) MoveLeader(ctx context.Context, w io.Writer, namespace, name, to string) error {
	s, err := p.open(ctx, namespace, name)
	if err != nil {
		return err
	}
	defer s.close()
	return p.handOff(ctx, w, s, to)
}

func (p *Plugin) handOff(ctx context.Context, w io.Writer, s *session, to string) error {
	lead, err := s.leader()
	if err != nil {
		return err
	}
	h := s.health()
	var target *member
	if to == "" {
		a := maintenance.Handoff(h, lead.health.ID)
		if a.Kind != maintenance.MoveLeader {
			return fmt.Errorf("%s", a.Reason)
		}
		target = s.byID(a.Member.ID)
	} else {
		if target = s.byName(to); target == nil {
			return fmt.Errorf("%s: %w", to, errNoMember)
		}
		if target == lead {
			fmt.Fprintf(w, "%s leads already\n", to)
			return nil
		}
		if err := etcdutil.CheckTransferee(lead.health, target.health); err != nil {
			return err
		}
	}
	if err := etcdutil.MoveLeader(ctx, lead.cfg, lead.endpoint, target.health.ID); err != nil {
		return err
	}
	deadline := time.Now().Add(leaderMoveTimeout)
	for {
		s.refresh(ctx)
		if now, err := s.leader(); err == nil && now == target {
			fmt.Fprintf(w, "leadership moved from %s to %s\n", lead.pod, target.pod)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("leadership did not reach %s within %v", target.pod, leaderMoveTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Compact compacts the history up to the current revision.
func (p *Plugin) Compact(ctx context.Context, w io.Writer, namespace, name string) error {
	s, err := p.open(ctx, namespace, name)
	if err != nil {
		return err
	}
	defer s.close()
	m, err := s.leader()
	if err != nil {
		return err
	}
	cfg := m.cfg
	cfg.Endpoints = []string{m.endpoint}
	rev, err := etcdutil.CompactToCurrent(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "compacted %s/%s up to revision %d; `kubectl etcd defrag %s` gives the space back to the disk\n", namespace, name, rev, name)
	return nil
}

// DisarmNoSpace disarms the NOSPACE alarms once the user has made room
// (compact, then defrag). etcd raises the alarm again at the first write
// that does not fit, so a database still near its quota shows it again.
// CORRUPT alarms are left alone: the member must be replaced first.
func (p *Plugin) DisarmNoSpace(ctx context.Context, w io.Writer, namespace, name string) error {
	s, err := p.open(ctx, namespace, name)
	if err != nil {
		return err
	}
	defer s.close()
	m, err := s.leader()
	if err != nil {
		return err
	}
	cfg := m.cfg
	cfg.Endpoints = []string{m.endpoint}
	disarmed, err := etcdutil.DisarmNoSpace(ctx, cfg)
	if err != nil {
		return err
	}
	// The followers apply the disarm a moment after the leader, and a member
	// whose own write went over the quota just before raises its alarm a
	// moment later: until no member reports a NOSPACE alarm (5 s at most), ask
	// again and disarm what was raised meanwhile, so that the status the user
	// reads next is true.
	for deadline := time.Now().Add(5 * time.Second); len(disarmed) > 0 && time.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		s.refresh(ctx)
		if !slices.ContainsFunc(s.health().Alarms, func(a etcdutil.Alarm) bool { return a.Type == etcdutil.AlarmNoSpace }) {
			break
		}
		more, err := etcdutil.DisarmNoSpace(ctx, cfg)
		if err != nil {
			return err
		}
		disarmed = append(disarmed, more...)
	}
	if len(disarmed) == 0 {
		fmt.Fprintln(w, "no NOSPACE alarm to disarm")
		return nil
	}
	fmt.Fprintf(w, "disarmed %s\n", alarmList(s, disarmed))
	return nil
}

// Snapshot saves a snapshot of the most up-to-date member to path.
func (p *Plugin) Snapshot(ctx context.Context, w io.Writer, namespace, name, path string) error {
	s, err := p.open(ctx, namespace, name)
	if err != nil {
		return err
	}
	defer s.close()
	var best *member
	for _, m := range s.members {
		if m.health.Err == nil && (best == nil || m.health.Revision > best.health.Revision) {
			best = m
		}
	}
	if best == nil {
		return fmt.Errorf("no member of %s/%s answered", namespace, name)
	}
	snap, err := backup.SaveSnapshot(ctx, backup.Source{Endpoints: []string{best.endpoint}, TLS: best.cfg.TLS, DialTimeout: p.Timeout},
		fileStore{}, func(int64) string { return path })
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "saved %s: %s from %s (etcd %s, revision %d), sha256 %s\n",
		path, maintenance.HumanBytes(snap.Size), best.pod, snap.EtcdVersion, snap.Revision, snap.SHA256)
	return nil
}

// allVotersAnswer fails when a member pod is unreachable or a voting member
// does not answer.
func (s *session) allVotersAnswer() error {
	if len(s.unreachable) > 0 {
		return fmt.Errorf("unreachable: %s", strings.Join(s.unreachable, ", "))
	}
	for _, m := range s.members {
		if m.health.Err != nil && !m.health.IsLearner {
			return fmt.Errorf("%s does not answer: %w", m.pod, m.health.Err)
		}
	}
	return nil
}

// lastBackup describes the newest successful EtcdBackup of the cluster:
// one whose endpoints name the cluster's client service or its members.
func (p *Plugin) lastBackup(ctx context.Context, c *api.EtcdCluster) string {
	list, err := p.Etcd.EtcdV1beta2().EtcdBackups(c.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Sprintf("unknown (%v)", err)
	}
	var best *api.EtcdBackup
	for i := range list.Items {
		b := &list.Items[i]
		if !b.Status.Succeeded || !backsUp(b, c) {
			continue
		}
		if best == nil || b.Status.LastSuccessDate.After(best.Status.LastSuccessDate.Time) {
			best = b
		}
	}
	if best == nil {
		return "none"
	}
	st := best.Status
	return fmt.Sprintf("%s at %s: %s, revision %d, %s", best.Name, st.LastSuccessDate.UTC().Format(time.RFC3339),
		st.BackupPath, st.EtcdRevision, maintenance.HumanBytes(st.BackupSize))
}

// backsUp tells whether a backup's endpoints point at cluster c: its client
// service "<name>-client[.<namespace>...]" or a member "<pod>.<name>[.<namespace>...]".
func backsUp(b *api.EtcdBackup, c *api.EtcdCluster) bool {
	for _, ep := range b.Spec.EtcdEndpoints {
		u, err := url.Parse(ep)
		if err != nil {
			continue
		}
		labels := strings.Split(u.Hostname(), ".")
		inNamespace := func(i int) bool { return len(labels) <= i || labels[i] == c.Namespace }
		switch {
		case labels[0] == c.Name+"-client" && inNamespace(1):
			return true
		case len(labels) > 1 && labels[1] == c.Name && inNamespace(2):
			return true
		}
	}
	return false
}

func role(m etcdutil.MemberHealth, leader uint64) api.MemberRole {
	switch {
	case m.IsLearner:
		return api.MemberRoleLearner
	case m.ID == leader:
		return api.MemberRoleLeader
	default:
		return api.MemberRoleFollower
	}
}

func alarmList(s *session, alarms []etcdutil.Alarm) string {
	if len(alarms) == 0 {
		return "none"
	}
	var out []string
	for _, a := range alarms {
		who := fmt.Sprintf("%x", a.MemberID)
		if m := s.byID(a.MemberID); m != nil {
			who = m.pod
		}
		out = append(out, a.Type+" on "+who)
	}
	return strings.Join(out, ", ")
}

func percent(part, whole int64) int64 {
	if whole <= 0 {
		return 0
	}
	return part * 100 / whole
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
