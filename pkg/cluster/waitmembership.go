package cluster

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

// WaitMembershipMain is `etcd-operator wait-membership`, the init container
// of a joining member's pod: it returns 0 once the member may start, and 1 if
// its timeout passes first (the pod fails and the operator replaces it).
func WaitMembershipMain(ctx context.Context, args []string, log *logrus.Entry) int {
	w, timeout, err := parseWaitFlags(args, log.Logger.Out)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		log.Error(err)
		return 2
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	log.Infof("waiting until %s is a member according to %s", w.PeerURL, strings.Join(w.Peers, ", "))
	lastReport := time.Now()
	err = etcdutil.WaitForMembership(ctx, w, func(missing error) {
		if time.Since(lastReport) >= waitReportInterval {
			lastReport = time.Now()
			log.Infof("still waiting: %v", missing)
		}
	})
	if err != nil {
		log.Errorf("gave up waiting to be added to the cluster: %v", err)
		return 1
	}
	log.Info("this member is in the membership; etcd may start")
	return 0
}

func parseWaitFlags(args []string, output io.Writer) (etcdutil.MembershipWait, time.Duration, error) {
	var (
		w                    etcdutil.MembershipWait
		peers, cert, key, ca string
		timeout              time.Duration
	)
	fs := flag.NewFlagSet(k8sutil.MembershipWaitSubcommand, flag.ContinueOnError)
	fs.SetOutput(output)
	fs.StringVar(&w.PeerURL, k8sutil.WaitFlagPeerURL, "", "peer URL of the joining member")
	fs.StringVar(&peers, k8sutil.WaitFlagPeers, "", "comma-separated peer URLs of the members it joins")
	fs.StringVar(&cert, k8sutil.WaitFlagCert, "", "peer certificate (with peer TLS)")
	fs.StringVar(&key, k8sutil.WaitFlagKey, "", "key of the peer certificate")
	fs.StringVar(&ca, k8sutil.WaitFlagCA, "", "CA of the peer certificates")
	fs.DurationVar(&timeout, k8sutil.WaitFlagTimeout, 0, "give up after this long (0: never)")
	if err := fs.Parse(args); err != nil {
		return w, 0, err
	}
	switch {
	case fs.NArg() > 0:
		return w, 0, fmt.Errorf("unexpected arguments: %v", fs.Args())
	case w.PeerURL == "":
		return w, 0, fmt.Errorf("--%s is required", k8sutil.WaitFlagPeerURL)
	case peers == "":
		return w, 0, fmt.Errorf("--%s is required", k8sutil.WaitFlagPeers)
	case timeout < 0:
		return w, 0, fmt.Errorf("--%s must not be negative", k8sutil.WaitFlagTimeout)
	}
	w.Peers = strings.Split(peers, ",")
	var tlsConfig *tls.Config
	if cert != "" || key != "" || ca != "" {
		var err error
		if tlsConfig, err = etcdutil.TLSConfigFromFiles(cert, key, ca); err != nil {
			return w, 0, err
		}
	}
	w.Client = etcdutil.NewPeerHTTPClient(tlsConfig)
	return w, timeout, nil
}
