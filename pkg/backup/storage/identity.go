package storage

import (
	"fmt"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"k8s.io/apimachinery/pkg/util/validation"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
)

// CloudIdentityFlag is the flag of the backup and restore operators that lists
// the namespaces they lend their cloud identity to.
const CloudIdentityFlag = "cloud-identity-namespaces"

// CloudIdentity says to which namespaces an operator lends its own cloud
// identity (credentialSource: OperatorServiceAccount). That identity reaches
// whatever its role or service account may reach, not one namespace's bucket,
// so whoever may create an EtcdBackup or EtcdRestore in a namespace it is lent to
// may read and overwrite every backup it can reach. The zero value lends it to
// no namespace. It is a flag.Value.
type CloudIdentity struct {
	// Operator names the binary in refusals, so that they say whose flag to set.
	Operator   string
	all        bool
	namespaces map[string]bool

	// azureOptions and absOptions let tests reach a token endpoint and an
	// emulator that serve a certificate of their own; nil means the SDKs'
	// defaults.
	azureOptions *azidentity.DefaultAzureCredentialOptions
	absOptions   *azblob.ClientOptions
}

// Set parses a comma-separated list of namespaces, or "*" for every namespace
// the operator watches; "" lends the identity to none.
func (c *CloudIdentity) Set(list string) error {
	c.all, c.namespaces = false, nil
	for _, ns := range strings.Split(list, ",") {
		ns = strings.TrimSpace(ns)
		switch {
		case ns == "":
			continue
		case ns == "*":
			c.all = true
			continue
		}
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("%q is not a namespace name: %s", ns, strings.Join(errs, "; "))
		}
		if c.namespaces == nil {
			c.namespaces = map[string]bool{}
		}
		c.namespaces[ns] = true
	}
	if c.all && len(c.namespaces) > 0 {
		return fmt.Errorf("give * or a list of namespaces, not both")
	}
	return nil
}

// String is the list Set parsed, sorted.
func (c *CloudIdentity) String() string {
	if c == nil {
		return ""
	}
	if c.all {
		return "*"
	}
	var out []string
	for ns := range c.namespaces {
		out = append(out, ns)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// Describe says to whom the identity is lent, for the operator's log.
func (c *CloudIdentity) Describe() string {
	switch {
	case c.all:
		return "every namespace the operator watches"
	case len(c.namespaces) == 0:
		return "no namespace"
	}
	return "namespaces " + c.String()
}

// LendsTo tells whether EtcdBackups and EtcdRestores of namespace may use the
// operator's cloud identity.
func (c CloudIdentity) LendsTo(namespace string) bool {
	return c.all || c.namespaces[namespace]
}

// credentials is how a store is reached.
type credentials int

const (
	// fromSecret: the keys in the secret the source names.
	fromSecret credentials = iota
	// fromOperatorIdentity: the operator's cloud identity, asked for by the
	// source and lent to its namespace.
	fromOperatorIdentity
	// fromGCSDefault: a GCS source that names no secret and asks for nothing
	// uses the operator's application default credentials, as in the original.
	fromGCSDefault
)

// credentialsRequest is what a source says about its credentials.
type credentialsRequest struct {
	// block and secretField name the source's fields in messages: "s3", "awsSecret".
	block, secretField string
	secret             string
	source             api.CredentialSource
	// defaultsToADC is true for GCS, the one store the original reached without a
	// secret.
	defaultsToADC bool
}

// chooseCredentials decides how the store of a source in namespace is reached.
// It never falls back from what the source asked for to something else: a
// refusal is Permanent, and becomes the resource's status reason and a Warning
// event.
func (c CloudIdentity) chooseCredentials(namespace string, r credentialsRequest) (credentials, error) {
	field := func(name string) string { return "spec." + r.block + "." + name }
	switch r.source {
	case api.CredentialSourceOperatorServiceAccount:
		if r.secret != "" {
			return 0, failure.Permanent(fmt.Errorf("%s %s and %s %s: %s", field(r.secretField), r.secret,
				field("credentialSource"), r.source, api.SecretAndIdentityMessage))
		}
		if !c.LendsTo(namespace) {
			return 0, failure.Permanent(c.refusal(namespace, field("credentialSource")))
		}
		return fromOperatorIdentity, nil
	case "", api.CredentialSourceSecret:
	default:
		return 0, failure.Permanent(fmt.Errorf("%s %q is neither %s nor %s", field("credentialSource"), r.source,
			api.CredentialSourceSecret, api.CredentialSourceOperatorServiceAccount))
	}
	switch {
	case r.secret != "":
		return fromSecret, nil
	case r.defaultsToADC && r.source == "":
		return fromGCSDefault, nil
	}
	return 0, failure.Permanent(fmt.Errorf("%s names no secret; without one, %s: %s uses the operator's own cloud identity where it lends it",
		field(r.secretField), field("credentialSource"), api.CredentialSourceOperatorServiceAccount))
}

func (c CloudIdentity) refusal(namespace, field string) error {
	operator := c.Operator
	if operator == "" {
		operator = "the operator"
	}
	return fmt.Errorf("%s %s: %s does not lend its cloud identity to namespace %s; "+
		"its administrator lends it with -%s=%s (a comma-separated list, or * for every namespace it watches), "+
		"or the source names a secret instead",
		field, api.CredentialSourceOperatorServiceAccount, operator, namespace, CloudIdentityFlag, namespace)
}
