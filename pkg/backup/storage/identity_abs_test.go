package storage

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"k8s.io/client-go/kubernetes/fake"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup/absstore"
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
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

// selfSigned writes a certificate and key for 127.0.0.1 under dir and returns
// their files and the TLS certificate, for Azurite and the token endpoint.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, cert tls.Certificate, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if cert, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	return certFile, keyFile, cert, pool
}

// entraToken is an access token as Microsoft Entra ID issues for audience
// (https://storage.azure.com for Azure Storage), unsigned: Azurite's --oauth
// basic checks the issuer, audience and lifetime only.
func entraToken(tenant, audience string) string {
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	now := time.Now().Unix()
	return enc(map[string]string{"alg": "RS256", "typ": "JWT"}) + "." + enc(map[string]any{
		"aud": audience, "iss": "https://sts.windows.net/" + tenant + "/",
		"iat": now - 60, "nbf": now - 60, "exp": now + 3600, "oid": "etcd-backup",
	}) + ".c2lnbmF0dXJl"
}

// Azure Workload Identity: azidentity's default chain exchanges the projected
// ServiceAccount token in AZURE_FEDERATED_TOKEN_FILE for an access token at
// AZURE_AUTHORITY_HOST, for AZURE_CLIENT_ID in AZURE_TENANT_ID. Here an https
// server plays Microsoft Entra ID, and Azurite, over https with --oauth basic,
// takes the token it hands out.
func TestABSWithAzureWorkloadIdentity(t *testing.T) {
	const tenant, clientID, assertion = "00000000-0000-0000-0000-0000000000aa", "00000000-0000-0000-0000-0000000000bb", "projected-serviceaccount-token"
	dir := t.TempDir()
	certFile, keyFile, cert, pool := selfSigned(t, dir)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}

	var served atomic.Int32
	entra := httptest.NewUnstartedServer(nil)
	entra.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		base := "https://" + r.Host + "/" + tenant
		switch r.URL.Path {
		case "/" + tenant + "/v2.0/.well-known/openid-configuration":
			_ = json.NewEncoder(w).Encode(map[string]string{
				"token_endpoint":         base + "/oauth2/v2.0/token",
				"authorization_endpoint": base + "/oauth2/v2.0/authorize",
				"issuer":                 base + "/v2.0",
			})
		case "/" + tenant + "/oauth2/v2.0/token":
			_ = r.ParseForm()
			if r.Form.Get("client_assertion") != assertion || r.Form.Get("client_id") != clientID ||
				!slices.Contains(strings.Fields(r.Form.Get("scope")), storageScope) || r.Form.Get("grant_type") != "client_credentials" {
				http.Error(w, fmt.Sprintf(`{"error":"invalid_client","error_description":"unexpected %v"}`, r.Form), http.StatusUnauthorized)
				return
			}
			served.Add(1)
			_ = json.NewEncoder(w).Encode(map[string]any{"token_type": "Bearer", "expires_in": 3600, "access_token": entraToken(tenant, "https://storage.azure.com")})
		default:
			http.NotFound(w, r)
		}
	})
	entra.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	entra.StartTLS()
	defer entra.Close()

	azurite, err := backuptest.StartAzuriteOAuth(context.Background(), filepath.Join(dir, "azurite"),
		backuptest.AzuriteTLS{CertFile: certFile, KeyFile: keyFile, Client: client}, "backups")
	if err != nil {
		t.Fatal(err)
	}
	defer azurite.Close()

	tokenFile := filepath.Join(dir, "azure-identity-token")
	if err := os.WriteFile(tokenFile, []byte(assertion), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PATH", "AZURE_USERNAME", "AZURE_PASSWORD"} {
		t.Setenv(k, "")
	}
	t.Setenv("AZURE_CLIENT_ID", clientID)
	t.Setenv("AZURE_TENANT_ID", tenant)
	t.Setenv("AZURE_FEDERATED_TOKEN_FILE", tokenFile)
	t.Setenv("AZURE_AUTHORITY_HOST", entra.URL+"/")

	lend := lending(t, "ns")
	// The default chain, with a transport that trusts the test certificate and
	// without asking login.microsoftonline.com which authority hosts exist.
	lend.azureOptions = &azidentity.DefaultAzureCredentialOptions{
		ClientOptions:            azcore.ClientOptions{Transport: client},
		DisableInstanceDiscovery: true,
	}
	lend.absOptions = &azblob.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: client}}
	store, loc, err := ForBackup(context.Background(), fake.NewSimpleClientset().CoreV1(), lend, "ns", absIdentitySpec(azurite.URL))
	if err != nil {
		t.Fatalf("%v\nAzurite:\n%s", err, azurite.Output())
	}
	roundTrip(t, store, loc.Key)
	if served.Load() == 0 {
		t.Fatal("the token did not come from the Entra ID endpoint")
	}

	// Azurite does check the token: one for another audience is refused, so
	// the round trip above was the exchanged token's doing.
	wrong, err := absstore.New(absstore.Config{Container: "backups", Endpoint: azurite.URL, ClientOptions: lend.absOptions,
		Credential: staticToken(entraToken(tenant, "https://vault.azure.net"))})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := wrong.Put(context.Background(), "x", strings.NewReader("x")); err == nil || !strings.Contains(err.Error(), "the operator's identity is refused") {
		t.Fatalf("a token for another audience: %v", err)
	}

	// Without the federated token the chain finds no identity, and says so
	// when the store is opened; that is retried.
	t.Setenv("AZURE_FEDERATED_TOKEN_FILE", filepath.Join(dir, "no-such-token"))
	if _, _, err := ForBackup(context.Background(), fake.NewSimpleClientset().CoreV1(), lend, "ns", absIdentitySpec(azurite.URL)); err == nil ||
		!strings.Contains(err.Error(), "spec.abs.credentialSource OperatorServiceAccount: the operator's Azure identity") || failure.IsPermanent(err) {
		t.Fatalf("without the federated token: %v", err)
	}
}

// staticToken is a credential that always hands out one token.
type staticToken string

func (s staticToken) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: string(s), ExpiresOn: time.Now().Add(time.Hour)}, nil
}
