package v1beta2_test

import (
	"encoding/json"
	"strings"
	"testing"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2/apitest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// validateAs decodes the object the way the operators do and runs the Go validation.
func validateAs(kind string, raw []byte) error {
	switch kind {
	case "EtcdCluster":
		var c api.EtcdCluster
		if err := json.Unmarshal(raw, &c); err != nil {
			return err
		}
		return c.Validate()
	case "EtcdBackup":
		var b api.EtcdBackup
		if err := json.Unmarshal(raw, &b); err != nil {
			return err
		}
		return b.Spec.Validate()
	case "EtcdRestore":
		var r api.EtcdRestore
		if err := json.Unmarshal(raw, &r); err != nil {
			return err
		}
		return r.Validate()
	}
	panic("unknown kind " + kind)
}

func TestValidationRejectsEveryInvalidCase(t *testing.T) {
	cases, err := apitest.LoadInvalid()
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) < 30 {
		t.Fatalf("the table should hold at least 30 invalid objects, has %d", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			raw, err := json.Marshal(tc.Object("default"))
			if err != nil {
				t.Fatal(err)
			}
			err = validateAs(tc.Kind, raw)
			if err == nil {
				t.Fatalf("accepted; want an error containing %q", tc.GoError)
			}
			if !strings.Contains(err.Error(), tc.GoError) {
				t.Fatalf("error %q does not contain %q", err, tc.GoError)
			}
		})
	}
}

func TestValidationAcceptsGoodSpecs(t *testing.T) {
	storage := `{"persistentVolumeClaimSpec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}}}}`
	tests := []struct{ name, spec string }{
		{"the example cluster", `{"size":3,"version":"3.5.21"}`},
		{"a leading v on the version", `{"size":1,"version":"v3.4.23"}`},
		{"etcd 3.2 is still accepted", `{"size":3,"version":"3.2.13"}`},
		{"a pre-release", `{"size":3,"version":"3.6.0-rc.2"}`},
		{"a registry with a port", `{"size":3,"repository":"registry.local:5000/etcd/etcd"}`},
		{"the full static TLS", `{"size":3,"TLS":{"static":{"member":{"peerSecret":"p","serverSecret":"s"},"operatorSecret":"o"}}}`},
		{"peer TLS alone", `{"size":3,"TLS":{"static":{"member":{"peerSecret":"p"}}}}`},
		{"an empty TLS block", `{"size":3,"TLS":{}}`},
		{"issued TLS in one line", `{"size":3,"TLS":{"issued":{}}}`},
		{"issued TLS with its CA secret and validity", `{"size":3,"TLS":{"issued":{"caSecret":"my-ca","certificateValidity":"720h"}}}`},
		{"issued TLS from a cert-manager ClusterIssuer", `{"size":3,"TLS":{"issued":{"issuerRef":{"name":"etcd-ca","kind":"ClusterIssuer"}}}}`},
		{"issued TLS from an external issuer", `{"size":3,"TLS":{"issued":{"issuerRef":{"name":"pca","kind":"AWSPCAClusterIssuer","group":"awspca.cert-manager.io"}}}}`},
		{"a volume per member", `{"size":3,"pod":` + storage + `}`},
		{"user labels, env and cluster domain", `{"size":5,"pod":{"labels":{"team":"a"},"etcdEnv":[{"name":"ETCD_AUTO_COMPACTION_RETENTION","value":"1"}],"ClusterDomain":".cluster.local","DNSTimeoutInSecond":60}}`},
		{"members started together", `{"size":3,"bootstrap":{"mode":"Together"}}`},
		{"a seed and members added one at a time, said explicitly", `{"size":3,"bootstrap":{"mode":"SeedAndJoin"}}`},
		{"a node lost after ten minutes not Ready", `{"size":3,"pod":{"nodeLostAfterSeconds":600}}`},
		{"tolerations and requests within limits", `{"size":3,"pod":{"tolerations":[{"key":"k","operator":"Exists","effect":"NoSchedule"}],"resources":{"requests":{"cpu":"100m"},"limits":{"cpu":"1"}}}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &api.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "example"}}
			if err := json.Unmarshal([]byte(tc.spec), &c.Spec); err != nil {
				t.Fatal(err)
			}
			if err := c.Validate(); err != nil {
				t.Fatalf("rejected: %v", err)
			}
		})
	}
}

func TestValidateUpdateOfTLS(t *testing.T) {
	plain := &api.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: api.ClusterSpec{Size: 3}}
	secure := plain.DeepCopy()
	secure.Spec.TLS = &api.TLSPolicy{Static: &api.StaticTLS{
		Member:         &api.MemberSecret{PeerSecret: "p", ServerSecret: "s"},
		OperatorSecret: "o",
	}}
	if err := secure.ValidateUpdate(plain); err != nil {
		t.Fatalf("static TLS switched on was refused: %v", err)
	}
	if err := plain.ValidateUpdate(secure); err == nil || !strings.Contains(err.Error(), api.StaticTLSSwitchedOffMessage) {
		t.Fatalf("static TLS switched off: got %v", err)
	}
	peersOnly := plain.DeepCopy()
	peersOnly.Spec.TLS = &api.TLSPolicy{Static: &api.StaticTLS{Member: &api.MemberSecret{PeerSecret: "p"}}}
	if err := peersOnly.ValidateUpdate(plain); err == nil || !strings.Contains(err.Error(), api.TLSSwitchedOnPartlyMessage) {
		t.Fatalf("TLS of peers alone switched on: got %v", err)
	}
	if err := peersOnly.ValidateUpdate(secure); err == nil || !strings.Contains(err.Error(), api.TLSOfPeersOrClientsChangedMessage) {
		t.Fatalf("TLS of clients dropped: got %v", err)
	}
	grown := plain.DeepCopy()
	grown.Spec.Size = 5
	if err := grown.ValidateUpdate(plain); err != nil {
		t.Fatalf("a resize was refused: %v", err)
	}
	issued := plain.DeepCopy()
	issued.Spec.TLS = &api.TLSPolicy{Issued: &api.IssuedTLS{}}
	if err := issued.ValidateUpdate(plain); err != nil {
		t.Fatalf("issued TLS switched on was refused: %v", err)
	}
	if err := plain.ValidateUpdate(issued); err != nil {
		t.Fatalf("issued TLS switched off was refused: %v", err)
	}
	if err := issued.ValidateUpdate(secure); err == nil || !strings.Contains(err.Error(), "between static and issued") {
		t.Fatalf("switching from static to issued: got %v", err)
	}
	if err := secure.ValidateUpdate(issued); err == nil || !strings.Contains(err.Error(), "between static and issued") {
		t.Fatalf("switching from issued to static: got %v", err)
	}
	namedCA := issued.DeepCopy()
	namedCA.Spec.TLS.Issued.CASecret = "c-ca"
	if err := namedCA.ValidateUpdate(issued); err != nil {
		t.Fatalf("naming the default CA secret was refused: %v", err)
	}
	namedCA.Spec.TLS.Issued.CASecret = "another-ca"
	if err := namedCA.ValidateUpdate(issued); err == nil || !strings.Contains(err.Error(), "the CA of an existing cluster cannot be changed") {
		t.Fatalf("changing the CA secret: got %v", err)
	}
	fromCertManager := plain.DeepCopy()
	fromCertManager.Spec.TLS = &api.TLSPolicy{Issued: &api.IssuedTLS{IssuerRef: &api.IssuerReference{Name: "etcd-ca"}}}
	if err := fromCertManager.ValidateUpdate(plain); err != nil {
		t.Fatalf("TLS from a cert-manager issuer switched on was refused: %v", err)
	}
	for _, tc := range []struct{ from, to *api.EtcdCluster }{{issued, fromCertManager}, {fromCertManager, issued}} {
		if err := tc.to.ValidateUpdate(tc.from); err == nil || !strings.Contains(err.Error(), api.IssuerSwitchedMessage) {
			t.Fatalf("moving between the operator's CA and a cert-manager issuer: got %v", err)
		}
	}
}

// Under issued TLS the secrets are named after the cluster, and the users'
// client secret is its own; under static TLS it is the operator's.
func TestTLSSecretsNames(t *testing.T) {
	issued := &api.TLSPolicy{Issued: &api.IssuedTLS{}}
	want := api.TLSSecrets{Peer: "c-peer-tls", Server: "c-server-tls", Operator: "c-operator-tls", Client: "c-client-tls", CA: "c-ca", Field: "spec.TLS.issued"}
	if got := issued.Secrets("c"); got != want || !issued.IsSecurePeer() || !issued.IsSecureClient() {
		t.Fatalf("issued: %+v", got)
	}
	static := &api.TLSPolicy{Static: &api.StaticTLS{Member: &api.MemberSecret{PeerSecret: "p", ServerSecret: "s"}, OperatorSecret: "o"}}
	want = api.TLSSecrets{Peer: "p", Server: "s", Operator: "o", Client: "o", Field: "spec.TLS.static"}
	if got := static.Secrets("c"); got != want {
		t.Fatalf("static: %+v", got)
	}
	var none *api.TLSPolicy
	if got := none.Secrets("c"); got != (api.TLSSecrets{}) {
		t.Fatalf("no TLS: %+v", got)
	}
}

func TestBackupPathsStoresAccept(t *testing.T) {
	for _, tc := range []struct {
		name string
		typ  api.BackupStorageType
		path string
	}{
		{"a key in folders", api.BackupStorageTypeS3, "etcd-backups/prod/example.db"},
		{"a hidden file", api.BackupStorageTypeS3, "bucket/.etcd.db"},
		{"a dotted key", api.BackupStorageTypeS3, "bucket/a..b/etcd.db"},
		{"an old S3 bucket with capitals", api.BackupStorageTypeS3, "Legacy_Bucket/etcd.db"},
		{"a dotted OSS bucket", api.BackupStorageTypeOSS, "my.bucket/etcd.db"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := api.BackupSpec{EtcdEndpoints: []string{"http://example-client:2379"}, StorageType: tc.typ}
			switch tc.typ {
			case api.BackupStorageTypeS3:
				s.S3 = &api.S3BackupSource{Path: tc.path, AWSSecret: "aws"}
			case api.BackupStorageTypeOSS:
				s.OSS = &api.OSSBackupSource{Path: tc.path, OSSSecret: "oss"}
			}
			if err := s.Validate(); err != nil {
				t.Fatalf("refused: %v", err)
			}
		})
	}
}

func TestValidationRefusesPatchReleasesThatLoseData(t *testing.T) {
	cluster := func(version, running string) *api.EtcdCluster {
		return &api.EtcdCluster{
			ObjectMeta: metav1.ObjectMeta{Name: "example"},
			Spec:       api.ClusterSpec{Size: 3, Version: version},
			Status:     api.ClusterStatus{CurrentVersion: running},
		}
	}
	tests := []struct {
		name    string
		cluster *api.EtcdCluster
		old     *api.EtcdCluster
		refused bool
	}{
		{name: "a new cluster on 3.5.1 is refused", cluster: cluster("3.5.1", ""), refused: true},
		{name: "a new cluster on 3.5.3 is made", cluster: cluster("3.5.3", "")},
		{name: "a cluster that runs 3.5.2 already is still run", cluster: cluster("v3.5.2", "3.5.2")},
		{name: "a move from 3.5.21 to 3.5.0 is refused", cluster: cluster("3.5.0", "3.5.21"), old: cluster("3.5.21", "3.5.21"), refused: true},
		{name: "a move from 3.5.2 to 3.5.21 is made", cluster: cluster("3.5.21", "3.5.2"), old: cluster("3.5.2", "3.5.2")},
		{name: "a new cluster on 3.4, which etcd no longer fixes, is made", cluster: cluster("3.4.23", "")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cluster.Validate()
			if tt.old != nil {
				err = tt.cluster.ValidateUpdate(tt.old)
			}
			switch {
			case tt.refused && (err == nil || !strings.Contains(err.Error(), "data inconsistency advisory")):
				t.Fatalf("err = %v, want the refusal and its reason", err)
			case !tt.refused && err != nil:
				t.Fatalf("refused: %v", err)
			}
		})
	}
}
