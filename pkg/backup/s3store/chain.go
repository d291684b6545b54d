package s3store

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
)

// DefaultChain is the process's own AWS identity, as the SDK's default chain
// finds it in its environment: keys in AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY; IRSA's AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE
// (exchanged with STS); EKS Pod Identity's AWS_CONTAINER_CREDENTIALS_FULL_URI
// and AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE; then the instance's role. It
// returns region (the bucket's), or without it the region of that
// environment (AWS_REGION, which the IRSA webhook sets), and a provider that
// renews the credentials before they expire. The credentials are fetched once
// here, so that an identity the pod does not have is reported when the store
// is opened, not as a failed upload later.
func DefaultChain(ctx context.Context, region string) (string, aws.CredentialsProvider, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err == nil && cfg.Region == "" && region != "" {
		// IRSA's exchange with STS needs a region too; the bucket's will do
		// where the environment names none. Where it names one, STS is asked
		// there, next to the pod, whatever the bucket's region.
		cfg, err = config.LoadDefaultConfig(ctx, config.WithRegion(region))
	}
	if err != nil {
		return "", nil, fmt.Errorf("the AWS SDK's default configuration: %w", err)
	}
	if region == "" {
		region = cfg.Region
	}
	if region == "" {
		return "", nil, errors.New("the operator's environment names no AWS region: " +
			"set AWS_REGION in its pod (the IRSA webhook does), or the bucket's region in spec.s3.region")
	}
	if cfg.Credentials == nil {
		return "", nil, errors.New("the AWS SDK's default chain has no credentials provider")
	}
	if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
		return "", nil, fmt.Errorf("the operator's AWS identity: the SDK's default chain found no credentials "+
			"(IRSA sets AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE, EKS Pod Identity AWS_CONTAINER_CREDENTIALS_FULL_URI): %w", err)
	}
	return region, cfg.Credentials, nil
}
