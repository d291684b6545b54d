package k8sutil

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func TestServicesGolden(t *testing.T) {
	c := newTestCluster()
	assertGolden(t, "service-peer", NewPeerService(c))
	assertGolden(t, "service-client", NewClientService(c))
}

func TestServicesSelectMemberPods(t *testing.T) {
	c := newTestCluster(withEveryPodKnob)
	pod := newSeedPod(c)
	for _, svc := range []*corev1.Service{NewPeerService(c), NewClientService(c)} {
		if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels)) {
			t.Errorf("service %s does not select member pod labels %v", svc.Name, pod.Labels)
		}
	}
	if pod.Spec.Subdomain != NewPeerService(c).Name {
		t.Errorf("pod subdomain %q is not the peer service %q", pod.Spec.Subdomain, NewPeerService(c).Name)
	}
}

func TestOnlyThePeerServicePublishesUnreadyMembers(t *testing.T) {
	c := newTestCluster()
	if !NewPeerService(c).Spec.PublishNotReadyAddresses {
		t.Error("the peer service hides unready members: a new cluster can never bootstrap")
	}
	if NewClientService(c).Spec.PublishNotReadyAddresses {
		t.Error("the client service sends clients to unready members")
	}
}
