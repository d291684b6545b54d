package s3store

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// OSSConfig is the Config for a bucket in Alibaba Cloud OSS, reached through OSS's
// S3-compatible API. OSS wants virtual-hosted addressing ("<bucket>.<endpoint>")
// and signs with the region named in its endpoint's host.
func OSSConfig(endpoint, bucket, accessKeyID, accessKeySecret string) (Config, error) {
	region, err := OSSRegion(endpoint)
	if err != nil {
		return Config{}, err
	}
	return Config{
		Bucket:      bucket,
		Region:      region,
		Endpoint:    endpoint,
		Credentials: aws.Credentials{AccessKeyID: accessKeyID, SecretAccessKey: accessKeySecret, Source: "OSS secret"},
	}, nil
}

// OSSRegion reads the region out of an OSS endpoint: "oss-cn-hangzhou" from
// http://oss-cn-hangzhou.aliyuncs.com, its "-internal" variant, or the
// "s3.oss-cn-hangzhou.aliyuncs.com" form.
func OSSRegion(endpoint string) (string, error) {
	raw := endpoint
	if !strings.Contains(raw, "://") {
		raw = "https://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return "", fmt.Errorf("OSS endpoint %q is not a URL like http://oss-cn-hangzhou.aliyuncs.com", endpoint)
	}
	labels := strings.Split(u.Hostname(), ".")
	if len(labels) > 1 && labels[0] == "s3" {
		labels = labels[1:]
	}
	region := strings.TrimSuffix(labels[0], "-internal")
	if !strings.HasPrefix(region, "oss-") || len(region) == len("oss-") {
		return "", fmt.Errorf("cannot tell the OSS region from endpoint %q: use a regional endpoint like http://oss-cn-hangzhou.aliyuncs.com", endpoint)
	}
	return region, nil
}
