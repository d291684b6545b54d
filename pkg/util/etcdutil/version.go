package etcdutil

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// VersionInfo is what a member's /version endpoint reports.
type VersionInfo struct {
	// Server is the member's binary version, e.g. "3.5.21".
	Server string `json:"etcdserver"`
	// Cluster is the version the cluster runs at, "3.5.0": the lowest
	// minor version among the members, decided by the leader once all
	// members have published theirs. It only moves up when every member
	// runs the newer minor version (or down through the downgrade API).
	Cluster string `json:"etcdcluster"`
	// Storage is the version of the data's schema, reported by 3.6 and
	// later.
	Storage string `json:"storage,omitempty"`
}

// EndpointVersion reads the /version endpoint of one member's client URL.
// The cluster version is not part of the gRPC API; this HTTP endpoint is
// served on the client port by every etcd 3.x, with the same TLS.
func EndpointVersion(ctx context.Context, cfg ClientConfig, endpoint string) (VersionInfo, error) {
	var v VersionInfo
	body, err := httpGet(ctx, cfg, strings.TrimSuffix(endpoint, "/")+"/version")
	if err != nil {
		return v, fmt.Errorf("version of %s: %w", endpoint, err)
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return v, fmt.Errorf("version of %s: %w", endpoint, err)
	}
	return v, nil
}

// ClusterVersion returns the cluster version as the first of cfg.Endpoints
// that answers reports it. A member that has not learned the cluster
// version yet reports "not_decided"; such answers are skipped.
func ClusterVersion(ctx context.Context, cfg ClientConfig) (string, error) {
	var errs []error
	for _, ep := range cfg.Endpoints {
		v, err := EndpointVersion(ctx, cfg, ep)
		switch {
		case err != nil:
			errs = append(errs, err)
		case v.Cluster == "" || v.Cluster == "not_decided":
			errs = append(errs, fmt.Errorf("%s has not decided the cluster version yet", ep))
		default:
			return v.Cluster, nil
		}
	}
	if len(errs) == 0 {
		return "", errors.New("cluster version: no endpoints")
	}
	return "", fmt.Errorf("cluster version: %w", errors.Join(errs...))
}

func httpGet(ctx context.Context, cfg ClientConfig, url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.requestTimeout())
	defer cancel()
	transport := &http.Transport{TLSClientConfig: cfg.TLS, DisableKeepAlives: true}
	defer transport.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	// Responses are a few bytes (/version) to some hundred KB (/metrics).
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return body, nil
}

// The actions of etcd's downgrade API (etcdctl downgrade validate|enable|
// cancel). It arrived with etcd 3.5, but only a 3.6 cluster can be
// downgraded (to 3.5): the cluster version can go down one minor version.
//
// DowngradeValidate checks that the cluster can be downgraded to
// targetVersion ("3.5" or "3.5.0") without changing anything, and returns
// the current cluster version as etcd gives it ("3.6").
func DowngradeValidate(ctx context.Context, cfg ClientConfig, targetVersion string) (string, error) {
	return downgrade(ctx, cfg, etcdserverpb.DowngradeRequest_VALIDATE, targetVersion)
}

// DowngradeEnable starts a downgrade to targetVersion: the cluster version
// drops to it at once, the storage is migrated back to its schema, and from
// then on members may be restarted one by one on the older binary. It ends
// by itself when every member runs the target version. It returns the
// cluster version from before ("3.6").
func DowngradeEnable(ctx context.Context, cfg ClientConfig, targetVersion string) (string, error) {
	return downgrade(ctx, cfg, etcdserverpb.DowngradeRequest_ENABLE, targetVersion)
}

// DowngradeCancel stops a downgrade that has not finished; members already
// on the older binary must then be moved forward again. etcd 3.6 accepts it
// with no downgrade enabled, 3.5 refuses that.
func DowngradeCancel(ctx context.Context, cfg ClientConfig) (string, error) {
	return downgrade(ctx, cfg, etcdserverpb.DowngradeRequest_CANCEL, "")
}

// downgrade sends the request through the raw gRPC client: etcd's 3.5 Go
// client, which the operator uses, has no typed method for it.
func downgrade(ctx context.Context, cfg ClientConfig, action etcdserverpb.DowngradeRequest_DowngradeAction, target string) (string, error) {
	target = strings.TrimPrefix(target, "v")
	resp, err := call(ctx, cfg, func(ctx context.Context, c *clientv3.Client) (*etcdserverpb.DowngradeResponse, error) {
		mc := clientv3.RetryMaintenanceClient(c, c.ActiveConnection())
		return mc.Downgrade(ctx, &etcdserverpb.DowngradeRequest{Action: action, Version: target})
	})
	if err != nil {
		return "", fmt.Errorf("downgrade %s %s: %w", strings.ToLower(action.String()), target, err)
	}
	return resp.Version, nil
}
