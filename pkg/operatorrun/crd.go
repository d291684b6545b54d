package operatorrun

import (
	"context"

	"github.com/sirupsen/logrus"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/openetcd/etcd-operator/pkg/crds"
)

// StatusRule is the rule that writing the status of resource through its
// status subresource needs in ns.
func StatusRule(group, resource, ns string) Rule {
	return Rule{Group: group, Resource: resource + "/status", Verbs: []string{"update"}, Namespace: ns}
}

// CRDForRole returns want as -create-crd=true installs it for an operator
// working in ns ("" for every namespace): without the status subresource
// (crds.WithoutStatusSubresource) when the role may update the resource
// but not <resource>/status, as the original's roles, and want itself
// otherwise.
//
// A CRD serving the status subresource ignores the status in an update of
// the object, so under such a role no status would ever be stored; without
// it, status is part of the object, written with an update of it as the
// original did (statusutil's writer falls back to that). The choice is made
// once, before the CRD is installed or updated to it: a role changed later
// takes a restart of the operator. When the role allows neither, or the
// apiserver cannot answer, want is kept: status is then not stored either
// way, and the status writer says what to fix.
func CRDForRole(ctx context.Context, kube kubernetes.Interface, want *apiextv1.CustomResourceDefinition, ns string, log *logrus.Entry) *apiextv1.CustomResourceDefinition {
	group, resource := want.Spec.Group, want.Spec.Names.Plural
	fields := logrus.Fields{"crd": want.Name, "namespace": ns}
	if ns == "" {
		fields["namespace"] = "all namespaces"
	}
	status := StatusRule(group, resource, ns)
	object := Rule{Group: group, Resource: resource, Verbs: []string{"update"}, Namespace: ns}
	missing, err := Missing(ctx, kube, status)
	if err == nil && len(missing) == 0 {
		return want
	}
	if err == nil {
		// Without the right to update the object either, nothing is
		// gained by dropping the subresource.
		if missing, err = Missing(ctx, kube, object); err == nil && len(missing) > 0 {
			return want
		}
	}
	if err != nil {
		log.WithFields(fields).Warnf("the CRD keeps its status subresource, as the role's permissions on %s are unknown: %v", resource, err)
		return want
	}
	log.WithFields(fields).Warnf("the role may not update %s, so the CRD is installed without the status subresource and status is written "+
		"with an update of the object, as the original etcd-operator did; grant {apiGroups: [%q], resources: [%q], verbs: [get, update, patch]} "+
		"and restart the operator to get the status subresource back", status.Resource, group, status.Resource)
	return crds.WithoutStatusSubresource(want)
}
