package backupcontroller

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2/apitest"
	"github.com/openetcd/etcd-operator/pkg/backup/s3store"
)

const examples = "../../../example/etcd-backup-operator"

func readExample(t *testing.T, name string, into any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(examples, name))
	if err != nil {
		t.Fatal(err)
	}
	// The placeholders are filled in as the original's walkthrough does.
	data = []byte(apitest.FillPlaceholders(string(data)))
	if err := yaml.UnmarshalStrict(data, into); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// The schema test in pkg/crds admits the examples; this one checks that
// the operator then accepts them too, and that the secret example parses.
func TestExampleBackupsAreAccepted(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(examples, "*backup_cr*.yaml"))
	if err != nil || len(files) != 11 {
		t.Fatalf("example backups %v (%v), want 11", files, err)
	}
	for _, f := range files {
		var eb api.EtcdBackup
		readExample(t, filepath.Base(f), &eb)
		if err := checkSpec(&eb.Spec); err != nil {
			t.Errorf("%s is refused: %v", f, err)
		}
	}
	for _, name := range []string{"backup_cr.yaml", "periodic_backup_cr.yaml"} {
		var eb api.EtcdBackup
		readExample(t, name, &eb)
		if eb.Spec.S3 == nil || eb.Spec.S3.Path != "mybucket/etcd.backup" || eb.Spec.S3.AWSSecret != "aws" ||
			!slices.Equal(eb.Spec.EtcdEndpoints, []string{"http://example-etcd-cluster-client:2379"}) {
			t.Errorf("%s after the walkthrough's sed: %+v; the placeholders <full-s3-path>, <aws-secret> and <etcd-cluster-endpoints> must be where the original had them", name, eb.Spec)
		}
	}
	var periodic api.EtcdBackup
	readExample(t, "periodic_backup_cr.yaml", &periodic)
	if p := periodic.Spec.BackupPolicy; p == nil || p.BackupIntervalInSecond != 125 || p.MaxBackups != 4 {
		t.Errorf("periodic example policy %+v, want every 125 s keeping 4", p)
	}

	var scheduled api.EtcdBackup
	readExample(t, "scheduled_backup_cr.yaml", &scheduled)
	if p := scheduled.Spec.BackupPolicy; !scheduled.Spec.IsPeriodic() || p.Schedule != "0 2 * * *" || p.TimeZone != "Europe/Berlin" ||
		p.Retention == nil || *p.Retention != (api.BackupRetention{Daily: 7, Weekly: 4, Monthly: 12}) {
		t.Errorf("scheduled example policy %+v, want 02:00 in Berlin keeping 7 days, 4 weeks and 12 months", p)
	}

	var archived api.EtcdBackup
	readExample(t, "archive_backup_cr.yaml", &archived)
	if p := archived.Spec.BackupPolicy; !archived.Spec.IsPeriodic() || p.Archive == nil || p.Archive.Interval() != 5*time.Second {
		t.Errorf("archive example policy %+v, want periodic with an archive every 5 s", p)
	}

	var secret corev1.Secret
	readExample(t, "aws-secret.yaml", &secret)
	data := map[string][]byte{}
	for k, v := range secret.StringData {
		data[k] = []byte(v)
	}
	if _, err := s3store.ParseAWSSecret("aws", data); err != nil {
		t.Errorf("aws-secret.yaml: %v", err)
	}
}

// The examples of a backup by cluster name, of a compressed and encrypted backup
// with its key Secret, and of its restore fit together as docs/user-guide/backup.md tells.
func TestExampleEncryptedBackupAndItsRestore(t *testing.T) {
	var byName api.EtcdBackup
	readExample(t, "backup_cr_by_name.yaml", &byName)
	if byName.Spec.ClusterName != "example-etcd-cluster" || len(byName.Spec.EtcdEndpoints) != 0 || !byName.Spec.IsPeriodic() {
		t.Errorf("backup_cr_by_name.yaml: %+v, want a periodic backup of example-etcd-cluster by name", byName.Spec)
	}

	var eb api.EtcdBackup
	readExample(t, "backup_cr_encrypted.yaml", &eb)
	if eb.Spec.ClusterName != "example-etcd-cluster" || eb.Spec.Compression != api.BackupCompressionZstd ||
		eb.Spec.Encryption == nil || eb.Spec.Verify == nil {
		t.Fatalf("backup_cr_encrypted.yaml: %+v, want a verified zstd-compressed, encrypted backup by cluster name", eb.Spec)
	}
	var secret corev1.Secret
	readExample(t, "backup-key-secret.yaml", &secret)
	if _, ok := secret.StringData[api.EncryptionKeySecretKey]; !ok || secret.Name != eb.Spec.Encryption.KeySecret {
		t.Errorf("backup-key-secret.yaml: secret %q with keys %v; the backup reads %q from secret %q",
			secret.Name, slices.Collect(maps.Keys(secret.StringData)), api.EncryptionKeySecretKey, eb.Spec.Encryption.KeySecret)
	}

	var er api.EtcdRestore
	readExample(t, "../etcd-restore-operator/restore_cr_encrypted.yaml", &er)
	if er.Spec.S3 == nil || er.Spec.S3.Path != eb.Spec.S3.Path || er.Spec.S3.AWSSecret != eb.Spec.S3.AWSSecret {
		t.Errorf("restore_cr_encrypted.yaml reads %+v; the backup is stored at %+v", er.Spec.S3, eb.Spec.S3)
	}
	if er.Spec.Encryption == nil || *er.Spec.Encryption != *eb.Spec.Encryption || er.Name != eb.Spec.ClusterName ||
		er.Spec.EtcdCluster.Name != eb.Spec.ClusterName {
		t.Errorf("restore_cr_encrypted.yaml: %s %+v, want the backup's key and cluster %q", er.Name, er.Spec, eb.Spec.ClusterName)
	}
}

func TestExampleDeployment(t *testing.T) {
	var d appsv1.Deployment
	readExample(t, "deployment.yaml", &d)
	if d.APIVersion != "apps/v1" || len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("deployment %s with %d containers", d.APIVersion, len(d.Spec.Template.Spec.Containers))
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.Image != "openetcd/etcd-operator:v0.1.0" || c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("image %s (%s)", c.Image, c.ImagePullPolicy)
	}
	if !slices.Equal(c.Command, []string{"etcd-backup-operator", "--create-crd=true"}) {
		t.Errorf("command %v", c.Command)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			env[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	if env["MY_POD_NAMESPACE"] != "metadata.namespace" || env["MY_POD_NAME"] != "metadata.name" {
		t.Errorf("downward API env %v", env)
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" {
		t.Errorf("readiness probe %+v", p)
	}
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 8081 {
		t.Errorf("ports %+v, want 8081 (the default -listen-addr)", c.Ports)
	}
	if c.Resources.Limits.Memory().IsZero() {
		t.Error("no memory limit")
	}
	sc := d.Spec.Template.Spec.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Error("the pod may run as root")
	}
	if d.Spec.Template.Spec.ServiceAccountName != "" {
		t.Errorf("service account %q, want the namespace default like the original", d.Spec.Template.Spec.ServiceAccountName)
	}
}
