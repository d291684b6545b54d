//go:build tools

// Package tools pins, in go.mod, the code generators run by hack/update-codegen.sh
// and the libraries the project has chosen before every package imports them.
package tools

import (
	_ "github.com/aws/aws-sdk-go-v2/config"
	_ "github.com/aws/aws-sdk-go-v2/credentials"
	_ "github.com/aws/aws-sdk-go-v2/feature/s3/manager"
	_ "github.com/aws/aws-sdk-go-v2/service/s3"
	_ "github.com/google/go-containerregistry/pkg/v1/tarball"
	_ "github.com/johannesboyne/gofakes3"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/sirupsen/logrus"
	_ "go.etcd.io/etcd/client/v3"
	_ "go.etcd.io/etcd/server/v3/embed"
	_ "k8s.io/code-generator"
)
