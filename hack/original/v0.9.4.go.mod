// The module file hack/original/build.sh builds coreos/etcd-operator v0.9.4
// with (the original has none: it used dep). The versions are those of its
// Gopkg.lock where the Go module proxy serves them (Kubernetes 1.12.6 as the
// pseudo-versions of the commits the lock names, etcd clientv3 3.2.13, grpc
// 1.14.0, golang/protobuf 1.3.0, aws-sdk-go 1.13.8), raised where the module
// graph or Go 1.26 needs it: modern-go/reflect2 1.0.2 and json-iterator
// 1.1.12 (reflect2 1.0.1 panics at run time on Go 1.18 and later), and the
// golang.org/x modules. The rest is what `go build -mod=mod` chose from
// these; go.sum beside it pins every download.
module github.com/coreos/etcd-operator

go 1.26.0

require (
	cloud.google.com/go v0.34.0
	github.com/Azure/azure-sdk-for-go v11.3.0-beta+incompatible
	github.com/Azure/go-autorest v11.1.1+incompatible
	github.com/aws/aws-sdk-go v1.13.8
	github.com/coreos/etcd v3.2.13+incompatible
	github.com/dgrijalva/jwt-go v3.2.0+incompatible
	github.com/gregjones/httpcache v0.0.0-20190611155906-901d90724c79
	github.com/hashicorp/golang-lru v1.0.2
	github.com/pborman/uuid v0.0.0-20170612153648-e790cca94e6c
	github.com/peterbourgon/diskv v2.0.1+incompatible
	github.com/pkg/errors v0.8.0
	github.com/prometheus/client_golang v0.9.2
	github.com/satori/uuid v1.2.0
	github.com/sirupsen/logrus v1.2.0
	golang.org/x/oauth2 v0.0.0-20181203162652-d668ce993890
	golang.org/x/time v0.16.0
	google.golang.org/api v0.1.0
	gopkg.in/inf.v0 v0.9.1
	k8s.io/api v0.0.0-20190226173710-145d52631d00
	k8s.io/apiextensions-apiserver v0.0.0-20190226180157-bd0469a053ff
	k8s.io/apimachinery v0.0.0-20190221084156-01f179d85dbc
	k8s.io/client-go v0.0.0-20190226174127-78295b709ec6
)

require (
	github.com/golang/groupcache v0.0.0-20241129210726-2c02b8208cf8 // indirect
	github.com/google/btree v1.1.3 // indirect
	github.com/googleapis/gax-go v2.0.2+incompatible // indirect
	golang.org/x/crypto v0.59.0 // indirect
	golang.org/x/term v0.48.0 // indirect
)

require (
	github.com/beorn7/perks v0.0.0-20180321164747-3a771d992973 // indirect
	github.com/davecgh/go-spew v1.1.1
	github.com/emicklei/go-restful v2.9.0+incompatible
	github.com/ghodss/yaml v1.0.0
	github.com/go-ini/ini v1.42.0
	github.com/gogo/protobuf v1.2.1 // indirect
	github.com/golang/glog v0.0.0-20160126235308-23def4e6c14b // indirect
	github.com/golang/protobuf v1.5.4 // indirect
	github.com/google/gofuzz v1.0.0
	github.com/googleapis/gnostic v0.2.0
	github.com/imdario/mergo v0.3.7
	github.com/jmespath/go-jmespath v0.0.0-20160202185014-0b12d6b521d8 // indirect
	github.com/json-iterator/go v1.1.12 // indirect
	github.com/matttproud/golang_protobuf_extensions v1.0.1 // indirect
	github.com/modern-go/concurrent v0.0.0-20180228061459-e0a39a4cb421 // indirect
	github.com/modern-go/reflect2 v1.0.2
	github.com/prometheus/client_model v0.0.0-20180712105110-5c3871d89910 // indirect
	github.com/prometheus/common v0.2.0
	github.com/prometheus/procfs v0.0.0-20181204211112-1dc9a6cbc91a // indirect
	github.com/spf13/pflag v1.0.3
	go.opencensus.io v0.19.0
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/text v0.44.0 // indirect
	google.golang.org/appengine v1.3.0 // indirect
	google.golang.org/genproto v0.0.0-20181219182458-5a97ab628bfb // indirect
	google.golang.org/grpc v1.17.0 // indirect
	gopkg.in/yaml.v2 v2.2.2
	k8s.io/kube-openapi v0.0.0-20190225204428-d50a959ae76a // indirect
)

replace (
	github.com/coreos/etcd => github.com/coreos/etcd v3.2.13+incompatible
	github.com/golang/protobuf => github.com/golang/protobuf v1.3.0
	google.golang.org/grpc => google.golang.org/grpc v1.14.0
	k8s.io/api => k8s.io/api v0.0.0-20190226173710-145d52631d00
	k8s.io/apiextensions-apiserver => k8s.io/apiextensions-apiserver v0.0.0-20190226180157-bd0469a053ff
	k8s.io/apimachinery => k8s.io/apimachinery v0.0.0-20190221084156-01f179d85dbc
	k8s.io/client-go => k8s.io/client-go v0.0.0-20190226174127-78295b709ec6
)
