package storage

import (
	"strings"
	"testing"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
)

func lending(t *testing.T, list string) CloudIdentity {
	t.Helper()
	c := CloudIdentity{Operator: "etcd-backup-operator"}
	if err := c.Set(list); err != nil {
		t.Fatal(err)
	}
	return c
}

// The decision is the specification of the opt-in: what the source asks for,
// whether the operator lends its identity to the namespace, and whether a
// secret is named, give the credentials used or one refusal; never a fallback.
func TestChooseCredentials(t *testing.T) {
	const identity = api.CredentialSourceOperatorServiceAccount
	s3 := func(secret string, source api.CredentialSource) credentialsRequest {
		return credentialsRequest{block: "s3", secretField: "awsSecret", secret: secret, source: source}
	}
	abs := func(secret string, source api.CredentialSource) credentialsRequest {
		return credentialsRequest{block: "abs", secretField: "absSecret", secret: secret, source: source}
	}
	gcs := func(secret string, source api.CredentialSource) credentialsRequest {
		return credentialsRequest{block: "gcs", secretField: "gcpSecret", secret: secret, source: source, defaultsToADC: true}
	}
	tests := []struct {
		name    string
		lend    string
		req     credentialsRequest
		want    credentials
		wantErr string
	}{
		{name: "a secret and no opt-in use the secret, as the original", req: s3("aws", ""), want: fromSecret},
		{name: "a secret with credentialSource Secret uses the secret", req: abs("abs", api.CredentialSourceSecret), want: fromSecret},
		{name: "a secret uses the secret even where the identity is lent", lend: "*", req: s3("aws", ""), want: fromSecret},
		{name: "the opt-in where the identity is lent to the namespace uses it", lend: "ns", req: s3("", identity), want: fromOperatorIdentity},
		{name: "the opt-in where the identity is lent to every namespace uses it", lend: "*", req: abs("", identity), want: fromOperatorIdentity},
		{name: "the opt-in for GCS where the identity is lent uses it", lend: "other,ns", req: gcs("", identity), want: fromOperatorIdentity},
		{name: "the opt-in without the flag is refused and says how to lend it", req: s3("", identity),
			wantErr: "spec.s3.credentialSource OperatorServiceAccount: etcd-backup-operator does not lend its cloud identity to namespace ns; its administrator lends it with -cloud-identity-namespaces=ns"},
		{name: "the opt-in where the identity is lent to other namespaces only is refused", lend: "team-a,team-b", req: abs("", identity),
			wantErr: "spec.abs.credentialSource OperatorServiceAccount: etcd-backup-operator does not lend its cloud identity to namespace ns"},
		{name: "the GCS opt-in without the flag is refused, not served by the default credentials", req: gcs("", identity),
			wantErr: "spec.gcs.credentialSource OperatorServiceAccount: etcd-backup-operator does not lend"},
		{name: "a secret and the opt-in together are refused", lend: "*", req: s3("aws", identity),
			wantErr: "spec.s3.awsSecret aws and spec.s3.credentialSource OperatorServiceAccount: a source names either its secret or credentialSource OperatorServiceAccount, not both"},
		{name: "a GCS secret and the opt-in together are refused", lend: "*", req: gcs("gcp", identity), wantErr: "not both"},
		{name: "no secret and no opt-in is refused for S3, as before", lend: "*", req: s3("", ""),
			wantErr: "spec.s3.awsSecret names no secret; without one, spec.s3.credentialSource: OperatorServiceAccount uses"},
		{name: "no secret and no opt-in is refused for ABS, as before", req: abs("", ""), wantErr: "spec.abs.absSecret names no secret"},
		{name: "no secret and no opt-in is GCS's default credentials, as the original", req: gcs("", ""), want: fromGCSDefault},
		{name: "GCS asking for its secret but naming none is refused", lend: "*", req: gcs("", api.CredentialSourceSecret), wantErr: "spec.gcs.gcpSecret names no secret"},
		{name: "an unknown source is refused", lend: "*", req: s3("", "NodeRole"), wantErr: `spec.s3.credentialSource "NodeRole" is neither Secret nor OperatorServiceAccount`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := lending(t, tc.lend).chooseCredentials("ns", tc.req)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				if !failure.IsPermanent(err) {
					t.Fatalf("a refusal is not Permanent, so it would be retried: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("credentials %d, want %d", got, tc.want)
			}
		})
	}
}

func TestCloudIdentityFlag(t *testing.T) {
	tests := []struct {
		list, want, describe, wantErr string
	}{
		{list: "", want: "", describe: "no namespace"},
		{list: "*", want: "*", describe: "every namespace the operator watches"},
		{list: " team-b, team-a,,", want: "team-a,team-b", describe: "namespaces team-a,team-b"},
		{list: "*,team-a", wantErr: "not both"},
		{list: "Team_A", wantErr: `"Team_A" is not a namespace name`},
	}
	for _, tc := range tests {
		var c CloudIdentity
		err := c.Set(tc.list)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Set(%q) = %v, want an error containing %q", tc.list, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("Set(%q): %v", tc.list, err)
			continue
		}
		if c.String() != tc.want || c.Describe() != tc.describe {
			t.Errorf("Set(%q): String %q, Describe %q; want %q, %q", tc.list, c.String(), c.Describe(), tc.want, tc.describe)
		}
	}
	var c CloudIdentity
	if err := c.Set("a"); err != nil {
		t.Fatal(err)
	}
	if err := c.Set("b"); err != nil || c.LendsTo("a") || !c.LendsTo("b") {
		t.Errorf("a second Set adds to the first instead of replacing it: %q, %v", c.String(), err)
	}
}
