package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// waitReportInterval spaces the "still waiting" lines of a joining member.
const waitReportInterval = 30 * time.Second

// waitMembership is `etcd-operator wait-membership`, the init container of a
// joining member's pod (k8sutil.WithMembershipWait): it returns 0 once the
// member may start, 1 if its timeout passes first (the pod fails and the
// operator replaces it), 2 for bad arguments.
func waitMembership(ctx context.Context, args []string, log *logrus.Entry) int {
	a, err := parseWaitMembership(args, log.Logger.Out)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		log.Error(err)
		return 2
	}
	var tlsConfig *tls.Config
	if a.Cert != "" || a.Key != "" || a.CA != "" {
		if tlsConfig, err = etcdutil.TLSConfigFromFiles(a.Cert, a.Key, a.CA); err != nil {
			log.Error(err)
			return 2
		}
	}
	if a.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, a.Timeout)
		defer cancel()
	}
	w := etcdutil.MembershipWait{PeerURL: a.PeerURL, Peers: a.Peers, Client: etcdutil.NewPeerHTTPClient(tlsConfig)}
	log.Infof("waiting until %s is a member according to %s", a.PeerURL, strings.Join(a.Peers, ", "))
	lastReport := time.Now()
	err = etcdutil.WaitForMembership(ctx, w, func(missing error) {
		if time.Since(lastReport) >= waitReportInterval {
			lastReport = time.Now()
			log.Infof("still waiting: %v", missing)
		}
	})
	if err != nil {
		log.WithError(err).Error("gave up waiting to be added to the cluster")
		return 1
	}
	log.Info("this member is in the membership; etcd may start")
	return 0
}

// parseWaitMembership parses what k8sutil.MembershipWaitArgs.Args encodes.
func parseWaitMembership(args []string, output io.Writer) (k8sutil.MembershipWaitArgs, error) {
	var (
		a     k8sutil.MembershipWaitArgs
		peers string
	)
	fs := flag.NewFlagSet(k8sutil.MembershipWaitSubcommand, flag.ContinueOnError)
	fs.SetOutput(output)
	fs.StringVar(&a.PeerURL, k8sutil.WaitFlagPeerURL, "", "peer URL of the joining member")
	fs.StringVar(&peers, k8sutil.WaitFlagPeers, "", "comma-separated peer URLs of the members it joins")
	fs.StringVar(&a.Cert, k8sutil.WaitFlagCert, "", "peer certificate (with peer TLS)")
	fs.StringVar(&a.Key, k8sutil.WaitFlagKey, "", "key of the peer certificate")
	fs.StringVar(&a.CA, k8sutil.WaitFlagCA, "", "CA of the peer certificates")
	fs.DurationVar(&a.Timeout, k8sutil.WaitFlagTimeout, 0, "give up after this long (0: never)")
	if err := fs.Parse(args); err != nil {
		return a, err
	}
	switch {
	case fs.NArg() > 0:
		return a, fmt.Errorf("unexpected arguments: %v", fs.Args())
	case a.PeerURL == "":
		return a, fmt.Errorf("--%s is required", k8sutil.WaitFlagPeerURL)
	case peers == "":
		return a, fmt.Errorf("--%s is required", k8sutil.WaitFlagPeers)
	case a.Timeout < 0:
		return a, fmt.Errorf("--%s must not be negative", k8sutil.WaitFlagTimeout)
	}
	a.Peers = strings.Split(peers, ",")
	return a, nil
}
