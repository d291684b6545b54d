package storage

import (
	"context"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/absstore"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
)

// storageScope is the Microsoft Entra scope of Azure Storage's data plane.
const storageScope = "https://storage.azure.com/.default"

// openABSWithIdentity opens a container with the operator's own Microsoft Entra
// identity, as azidentity's default chain finds it in the pod: Azure Workload
// Identity's AZURE_CLIENT_ID, AZURE_TENANT_ID and AZURE_FEDERATED_TOKEN_FILE
// (which its webhook injects into pods labelled azure.workload.identity/use),
// a service principal's AZURE_CLIENT_SECRET, then the node's managed identity.
func openABSWithIdentity(ctx context.Context, lend CloudIdentity, src *api.ABSBackupSource, loc Location) (backup.Store, Location, error) {
	field := "spec.abs.credentialSource " + string(src.CredentialSource)
	cred, err := azidentity.NewDefaultAzureCredential(lend.azureOptions)
	if err != nil {
		return nil, Location{}, fmt.Errorf("%s: the operator's Azure identity: %w", field, err)
	}
	// The endpoint is checked before a token is asked for, so that a token is
	// never fetched for a URL it would not be sent to.
	store, err := absstore.New(absstore.Config{Container: loc.Bucket, Endpoint: src.Endpoint, Credential: cred, ClientOptions: lend.absOptions})
	if err != nil {
		return nil, Location{}, failure.Permanent(fmt.Errorf("%s: %w", field, err))
	}
	// A token is fetched once here, so that an identity the pod does not have
	// is reported when the store is opened, not as a failed upload later; the
	// credential keeps it for the client. Not Permanent: Entra ID may be down.
	if _, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{storageScope}}); err != nil {
		return nil, Location{}, fmt.Errorf("%s: the operator's Azure identity (Azure Workload Identity sets AZURE_CLIENT_ID, AZURE_TENANT_ID and AZURE_FEDERATED_TOKEN_FILE in pods labelled azure.workload.identity/use: \"true\"): %w", field, err)
	}
	return store, loc, nil
}
