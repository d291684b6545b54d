package kubectlplugin

import (
	"bytes"
	"strings"
	"testing"
	"time"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

func TestRotateCertificates(t *testing.T) {
	issued := func(c *api.EtcdCluster) { c.Spec.TLS = &api.TLSPolicy{Issued: &api.IssuedTLS{}} }
	at := time.Date(2026, 11, 28, 23, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		change    func(*api.EtcdCluster)
		want      string // the annotation's value afterwards
		wantOut   string
		wantError string
	}{
		{name: "a cluster of issued TLS is asked for a rotation, named by the time", change: issued, want: "2026-11-28T23:00:00Z",
			wantOut: "rotation of its certificates asked (etcd.database.coreos.com/rotate-certificates: 2026-11-28T23:00:00Z)"},
		{name: "a rotation asked again is a new rotation: the annotation gets a new value", change: func(c *api.EtcdCluster) {
			issued(c)
			c.Annotations = map[string]string{api.RotateCertificatesAnnotation: "2026-01-01T00:00:00Z", "team": "a"}
		}, want: "2026-11-28T23:00:00Z", wantOut: "status.certificatesRotated says 2026-11-28T23:00:00Z once done"},
		{name: "a paused cluster is annotated, and told it renews nothing until resumed", change: func(c *api.EtcdCluster) { issued(c); c.Spec.Paused = true },
			want: "2026-11-28T23:00:00Z", wantOut: "is paused: nothing is renewed until `kubectl etcd resume example`"},
		{name: "a cluster of static TLS is refused: the operator holds no key to renew its certificates", change: func(c *api.EtcdCluster) {
			c.Spec.TLS = &api.TLSPolicy{Static: &api.StaticTLS{OperatorSecret: "operator-tls"}}
		}, wantError: "does not have spec.TLS.issued"},
		{name: "a cluster without TLS is refused", wantError: "does not have spec.TLS.issued"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newKubeFixture(t, tt.change)
			var out bytes.Buffer
			_, err := f.plugin.RotateCertificates(t.Context(), &out, ns, "example", at)
			if tt.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantError) {
					t.Fatalf("err = %v, want %q", err, tt.wantError)
				}
				for _, a := range f.etcd.Actions() {
					if a.GetVerb() == "patch" {
						t.Error("a refused rotation patched the cluster")
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := f.stored(t)
			if v := got.Annotations[api.RotateCertificatesAnnotation]; v != tt.want {
				t.Errorf("annotation = %q, want %q", v, tt.want)
			}
			if tt.change != nil && got.Spec.TLS == nil {
				t.Error("the spec was not kept")
			}
			if !strings.Contains(out.String(), tt.wantOut) {
				t.Errorf("printed %q, want %q", out.String(), tt.wantOut)
			}
		})
	}
}

// TestRotateCertsCommandKeepsOtherAnnotations: the command patches its one
// annotation, and -o name prints the object as kubectl does.
func TestRotateCertsCommandKeepsOtherAnnotations(t *testing.T) {
	f := newKubeFixture(t, func(c *api.EtcdCluster) {
		c.Spec.TLS = &api.TLSPolicy{Issued: &api.IssuedTLS{}}
		c.Annotations = map[string]string{"team": "a"}
	})
	out, _, err := cliRun(t, f.plugin, "rotate-certs", "example", "-n", ns, "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	if out != "etcdcluster.etcd.database.coreos.com/example\n" {
		t.Errorf("printed %q", out)
	}
	got := f.stored(t)
	if _, err := time.Parse(time.RFC3339Nano, got.Annotations[api.RotateCertificatesAnnotation]); err != nil || got.Annotations["team"] != "a" {
		t.Errorf("annotations = %v, want a time and the others kept", got.Annotations)
	}
}

func TestRotateCA(t *testing.T) {
	issued := func(c *api.EtcdCluster) { c.Spec.TLS = &api.TLSPolicy{Issued: &api.IssuedTLS{}} }
	at := time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		change    func(*api.EtcdCluster)
		want      string // the annotation's value afterwards
		wantOut   []string
		wantError string
	}{
		{name: "a cluster of issued TLS is asked for a CA rotation, named by the time", change: issued, want: "2026-11-29T07:00:00Z",
			wantOut: []string{"rotation of its CA asked (etcd.database.coreos.com/rotate-ca: 2026-11-29T07:00:00Z)", "status.caRotation.lastRotation says 2026-11-29T07:00:00Z once done",
				"applications using secret example-client-tls read it again"}},
		{name: "a rotation asked again is a new rotation: the annotation gets a new value, and other annotations stay", change: func(c *api.EtcdCluster) {
			issued(c)
			c.Annotations = map[string]string{api.RotateCAAnnotation: "2026-01-01T00:00:00Z", "team": "a"}
		}, want: "2026-11-29T07:00:00Z", wantOut: []string{"`kubectl etcd certs example` shows where it is"}},
		{name: "a rotation asked while one is under way is told it comes after it", change: func(c *api.EtcdCluster) {
			issued(c)
			c.Status.CARotation = &api.CARotationStatus{Rotation: "r1", Step: "reissue"}
		}, want: "2026-11-29T07:00:00Z", wantOut: []string{"has rotation r1 under way at step reissue: it is carried out to its end first, then this one"}},
		{name: "a paused cluster is annotated, and told it rotates nothing until resumed", change: func(c *api.EtcdCluster) { issued(c); c.Spec.Paused = true },
			want: "2026-11-29T07:00:00Z", wantOut: []string{"is paused: nothing is rotated until `kubectl etcd resume example`"}},
		{name: "a cluster of static TLS is refused: the operator holds no key of its CA", change: func(c *api.EtcdCluster) {
			c.Spec.TLS = &api.TLSPolicy{Static: &api.StaticTLS{OperatorSecret: "operator-tls"}}
		}, wantError: "the operator rotates only the CA of the certificates it issues"},
		{name: "a cluster without TLS is refused", wantError: "does not have spec.TLS.issued"},
		{name: "a cluster whose certificates cert-manager issues is refused: its CA is the issuer's", change: func(c *api.EtcdCluster) {
			c.Spec.TLS = &api.TLSPolicy{Issued: &api.IssuedTLS{IssuerRef: &api.IssuerReference{Name: "etcd-ca"}}}
		}, wantError: "takes its certificates from cert-manager Issuer etcd-ca, whose CA is rotated there"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newKubeFixture(t, tt.change)
			var out bytes.Buffer
			_, err := f.plugin.RotateCA(t.Context(), &out, ns, "example", at)
			if tt.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantError) {
					t.Fatalf("err = %v, want %q", err, tt.wantError)
				}
				for _, a := range f.etcd.Actions() {
					if a.GetVerb() == "patch" {
						t.Error("a refused rotation patched the cluster")
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := f.stored(t)
			if v := got.Annotations[api.RotateCAAnnotation]; v != tt.want {
				t.Errorf("annotation = %q, want %q", v, tt.want)
			}
			if _, other := got.Annotations[api.RotateCertificatesAnnotation]; other {
				t.Error("a CA rotation asked for a rotation of the certificates too")
			}
			if got.Spec.TLS == nil {
				t.Error("the spec was not kept")
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("printed %q, want %q", out.String(), w)
				}
			}
		})
	}
}

// TestRotateCACommandKeepsOtherAnnotations: the command patches its one
// annotation, and -o name prints the object as kubectl does.
func TestRotateCACommandKeepsOtherAnnotations(t *testing.T) {
	f := newKubeFixture(t, func(c *api.EtcdCluster) {
		c.Spec.TLS = &api.TLSPolicy{Issued: &api.IssuedTLS{}}
		c.Annotations = map[string]string{"team": "a"}
	})
	out, _, err := cliRun(t, f.plugin, "rotate-ca", "example", "-n", ns, "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	if out != "etcdcluster.etcd.database.coreos.com/example\n" {
		t.Errorf("printed %q", out)
	}
	got := f.stored(t)
	if _, err := time.Parse(time.RFC3339Nano, got.Annotations[api.RotateCAAnnotation]); err != nil || got.Annotations["team"] != "a" {
		t.Errorf("annotations = %v, want a time and the others kept", got.Annotations)
	}
}
