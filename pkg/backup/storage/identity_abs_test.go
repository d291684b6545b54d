package storage

import (
	"context"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
)

func absIdentitySpec(endpoint string) *api.BackupSpec {
	return &api.BackupSpec{StorageType: api.BackupStorageTypeABS, BackupSource: api.BackupSource{ABS: &api.ABSBackupSource{
		Path: "backups/etcd.backup", Endpoint: endpoint, CredentialSource: api.CredentialSourceOperatorServiceAccount}}}
}

// A token is never asked for, let alone sent, for a plain http endpoint: the
// refusal comes before the credential chain is tried.
func TestABSIdentityIsSentOverHTTPSOnly(t *testing.T) {
	for _, k := range []string{"AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_FEDERATED_TOKEN_FILE", "AZURE_CLIENT_SECRET"} {
		t.Setenv(k, "")
	}
	for endpoint, want := range map[string]string{
		"http://127.0.0.1:10000/devstoreaccount1": "the operator's identity is sent over https only",
		"": "needs the account's blob service URL as its endpoint",
	} {
		_, _, err := ForBackup(context.Background(), fake.NewSimpleClientset().CoreV1(), lending(t, "ns"), "ns", absIdentitySpec(endpoint))
		if err == nil || !strings.Contains(err.Error(), "spec.abs.credentialSource OperatorServiceAccount: ") || !strings.Contains(err.Error(), want) {
			t.Errorf("endpoint %q: error %v, want one containing %q", endpoint, err, want)
		}
		if !failure.IsPermanent(err) {
			t.Errorf("endpoint %q: the refusal is not Permanent: %v", endpoint, err)
		}
	}
}
