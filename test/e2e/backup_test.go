//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// Bounds of the backup waits: a snapshot of a tiny cluster takes well under a
// second; the first periodic backup comes after one interval.
const (
	backupTimeout   = 2 * time.Minute
	periodicSeconds = 5
	periodicKeep    = 2
	periodicRounds  = 4
)

// TestBackupToAnS3CompatibleStore is the S3 part of the original's
// TestBackupAndRestore on a store of our own: a one-shot EtcdBackup of a cluster made
// from the example lands in the bucket; a periodic one every 5 s with maxBackups 2
// keeps exactly the newest two snapshots.
func TestBackupToAnS3CompatibleStore(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	deployFile := f.Env.Path("example", "etcd-backup-operator", "deployment.yaml")
	if _, err := os.Stat(f.Env.Path("cmd", "backup-operator")); err != nil {
		t.Fatalf("cmd/backup-operator is missing from the tree: %v", err)
	}
	if _, err := os.Stat(deployFile); err != nil {
		t.Fatalf("cmd/backup-operator exists but its example deployment does not: %v", err)
	}

	bucket := "e2e-backups"
	srv := startS3Server(t, bucket)

	deployBackupOperator(t, deployFile)

	// A cluster like README's example, renamed so that it does not collide with the
	// example test's.
	name := framework.UniqueName("backup")
	watchCluster(t, framework.DumpTarget{Namespace: opNS, Cluster: name, OperatorNamespace: opNS})
	if err := f.CreateFromExample(ctx, opNS, f.Env.Path("example", "example-etcd-cluster.yaml"),
		"s/name: example-etcd-cluster$/name: "+name+"/"); err != nil {
		t.Fatal(err)
	}
	waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	if err := f.PutAndGet(ctx, opNS, name, false, "/e2e/backup", "saved", dataTimeout); err != nil {
		t.Fatal(err)
	}

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "aws-" + name}, StringData: srv.AWSSecretData()}
	if _, err := f.Kube.CoreV1().Secrets(opNS).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = f.Kube.CoreV1().Secrets(opNS).Delete(context.Background(), secret.Name, metav1.DeleteOptions{})
	})
	source := func(path string) api.BackupSource {
		return api.BackupSource{S3: &api.S3BackupSource{
			Path: bucket + "/" + path, AWSSecret: secret.Name, Endpoint: srv.Endpoint, ForcePathStyle: true,
		}}
	}
	endpoints := []string{framework.ClientURL(name, false)}

	t.Run("one-shot", func(t *testing.T) {
		key := "oneshot/" + name + ".db"
		b := createBackup(t, &api.EtcdBackup{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-once"},
			Spec:       api.BackupSpec{EtcdEndpoints: endpoints, StorageType: api.BackupStorageTypeS3, BackupSource: source(key)},
		})
		var done *api.EtcdBackup
		err := framework.WaitFor(ctx, backupTimeout, framework.Poll, "status.succeeded of EtcdBackup "+b.Name, func(ctx context.Context) (bool, string, error) {
			got, err := f.Etcd.EtcdV1beta2().EtcdBackups(opNS).Get(ctx, b.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			done = got
			return got.Status.Succeeded, fmt.Sprintf("%+v", got.Status), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		size, err := srv.Head(ctx, bucket, key)
		if err != nil {
			t.Fatalf("the backup reports success but the object is not in the bucket: %v", err)
		}
		if size == 0 {
			t.Errorf("s3://%s/%s is empty", bucket, key)
		}
		if done.Status.EtcdVersion != "3.5.21" || done.Status.EtcdRevision <= 1 {
			t.Errorf("status = %+v, want etcdVersion 3.5.21 and the revision of the written data", done.Status)
		}
		t.Logf("s3://%s/%s: %d bytes, status %+v", bucket, key, size, done.Status)
	})

	t.Run("one-shot of a TLS cluster with clientTLSSecret", func(t *testing.T) {
		// Certificates from example/tls/gen-certs.sh, stored under names of this
		// test's own so that it does not collide with the TLS test's secrets.
		tlsName := framework.UniqueName("backuptls")
		dir := t.TempDir()
		if _, err := f.Run(ctx, framework.Cmd{
			Name: "bash",
			Args: []string{f.Env.Path("example", "tls", "gen-certs.sh")},
			Env:  []string{"CLUSTER=" + tlsName, "NAMESPACE=" + opNS, "OUT=" + dir},
		}); err != nil {
			t.Fatalf("gen-certs.sh: %v", err)
		}
		secrets := map[string][]string{
			tlsName + "-peer":   {"peer.crt", "peer.key", "peer-ca.crt"},
			tlsName + "-server": {"server.crt", "server.key", "server-ca.crt"},
			tlsName + "-client": {"etcd-client.crt", "etcd-client.key", "etcd-client-ca.crt"},
		}
		for secretName, files := range secrets {
			data := map[string][]byte{}
			for _, file := range files {
				b, err := os.ReadFile(dir + "/" + file)
				if err != nil {
					t.Fatal(err)
				}
				data[file] = b
			}
			sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secretName}, Data: data}
			if _, err := f.Kube.CoreV1().Secrets(opNS).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = f.Kube.CoreV1().Secrets(opNS).Delete(context.Background(), secretName, metav1.DeleteOptions{})
			})
		}
		watchCluster(t, framework.DumpTarget{Namespace: opNS, Cluster: tlsName, Secure: true, OperatorNamespace: opNS})
		cl := &api.EtcdCluster{
			ObjectMeta: metav1.ObjectMeta{Name: tlsName},
			Spec: api.ClusterSpec{Size: 1, Version: "3.5.21", TLS: &api.TLSPolicy{Static: &api.StaticTLS{
				Member:         &api.MemberSecret{PeerSecret: tlsName + "-peer", ServerSecret: tlsName + "-server"},
				OperatorSecret: tlsName + "-client",
			}}},
		}
		if _, err := f.Etcd.EtcdV1beta2().EtcdClusters(opNS).Create(ctx, cl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = f.Etcd.EtcdV1beta2().EtcdClusters(opNS).Delete(context.Background(), tlsName, metav1.DeleteOptions{})
		})
		waitReady(t, opNS, tlsName, 1, bootstrapTimeout(1))

		key := "tls/" + tlsName + ".db"
		b := createBackup(t, &api.EtcdBackup{
			ObjectMeta: metav1.ObjectMeta{Name: tlsName},
			Spec: api.BackupSpec{
				EtcdEndpoints:   []string{framework.ClientURL(tlsName, true)},
				StorageType:     api.BackupStorageTypeS3,
				BackupSource:    source(key),
				ClientTLSSecret: tlsName + "-client",
			},
		})
		var done *api.EtcdBackup
		err := framework.WaitFor(ctx, backupTimeout, framework.Poll, "status.succeeded of EtcdBackup "+b.Name, func(ctx context.Context) (bool, string, error) {
			got, err := f.Etcd.EtcdV1beta2().EtcdBackups(opNS).Get(ctx, b.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			done = got
			return got.Status.Succeeded, fmt.Sprintf("%+v", got.Status), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		size, err := srv.Head(ctx, bucket, key)
		if err != nil || size == 0 {
			t.Fatalf("the TLS backup reports success but s3://%s/%s is missing or empty (size %d): %v", bucket, key, size, err)
		}
		if done.Status.SHA256 == "" || done.Status.BackupSize != size {
			t.Errorf("status %+v does not describe the stored object of %d bytes", done.Status, size)
		}
		t.Logf("s3://%s/%s: %d bytes over https with the client certificate", bucket, key, size)
	})

	t.Run("periodic keeps the newest two", func(t *testing.T) {
		prefix := "periodic/" + name
		createBackup(t, &api.EtcdBackup{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-periodic"},
			Spec: api.BackupSpec{
				EtcdEndpoints: endpoints, StorageType: api.BackupStorageTypeS3, BackupSource: source(prefix),
				BackupPolicy: &api.BackupPolicy{BackupIntervalInSecond: periodicSeconds, MaxBackups: periodicKeep},
			},
		})
		// Every object is seen: each lives for two intervals and the list runs every second.
		seen := &objectsSeen{at: map[string]time.Time{}}
		err := framework.WaitFor(ctx, time.Duration(periodicRounds+4)*periodicSeconds*time.Second+backupTimeout, time.Second,
			fmt.Sprintf("%d periodic backups under s3://%s/%s", periodicRounds, bucket, prefix),
			func(ctx context.Context) (bool, string, error) {
				objs, err := srv.List(ctx, bucket, prefix)
				if err != nil {
					return false, err.Error(), nil
				}
				seen.add(objs)
				if len(objs) > periodicKeep+1 {
					// One more than the limit exists between an upload and its pruning.
					return false, "", fmt.Errorf("%d objects stored at once with maxBackups %d: %v", len(objs), periodicKeep, framework.KeysOf(objs))
				}
				return len(seen.order) >= periodicRounds, fmt.Sprintf("seen %d: %v; now %v", len(seen.order), seen.order, framework.KeysOf(objs)), nil
			})
		if err != nil {
			t.Fatal(err)
		}
		// The newest two seen so far must be what remains, once the pruning that
		// follows the latest upload is done.
		err = framework.WaitFor(ctx, time.Duration(periodicSeconds)*time.Second, 200*time.Millisecond, "exactly the newest two backups to remain",
			func(ctx context.Context) (bool, string, error) {
				objs, err := srv.List(ctx, bucket, prefix)
				if err != nil {
					return false, err.Error(), nil
				}
				seen.add(objs)
				keys := framework.KeysOf(objs)
				slices.Sort(keys)
				newest := slices.Clone(seen.order[len(seen.order)-periodicKeep:])
				slices.Sort(newest)
				return slices.Equal(keys, newest), fmt.Sprintf("stored %v, newest seen %v (all seen, in order: %v)", keys, newest, seen.order), nil
			})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("backups seen in order: %v", seen.order)
		for _, k := range seen.order {
			if !strings.HasPrefix(k, prefix+"_v") {
				t.Errorf("periodic backup %q is not named <path>_v<revision>_<time>", k)
			}
		}
	})

	t.Run("scheduled every minute keeps what retention says", func(t *testing.T) {
		prefix := "scheduled/" + name
		createBackup(t, &api.EtcdBackup{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-scheduled"},
			Spec: api.BackupSpec{
				EtcdEndpoints: endpoints, StorageType: api.BackupStorageTypeS3, BackupSource: source(prefix),
				BackupPolicy: &api.BackupPolicy{Schedule: "* * * * *", TimeZone: "Europe/Berlin", Retention: &api.BackupRetention{Hourly: 1}},
			},
		})
		// Two runs, a minute apart; the second one's pruning keeps only the
		// newest of the hour, which is also the newest.
		seen := &objectsSeen{at: map[string]time.Time{}}
		err := framework.WaitFor(ctx, 3*time.Minute+backupTimeout, time.Second, "two scheduled backups under s3://"+bucket+"/"+prefix+" and one left",
			func(ctx context.Context) (bool, string, error) {
				objs, err := srv.List(ctx, bucket, prefix)
				if err != nil {
					return false, err.Error(), nil
				}
				seen.add(objs)
				keys := framework.KeysOf(objs)
				return len(seen.order) >= 2 && len(keys) == 1 && keys[0] == seen.order[len(seen.order)-1],
					fmt.Sprintf("seen in order %v; stored now %v", seen.order, keys), nil
			})
		if err != nil {
			t.Fatal(err)
		}
		if gap := seen.at[seen.order[1]].Sub(seen.at[seen.order[0]]); gap < 30*time.Second {
			t.Errorf("two scheduled backups %v apart under a schedule of one a minute", gap)
		}
		t.Logf("scheduled backups seen in order: %v; the newest alone is kept", seen.order)
	})
}

// objectsSeen are the objects a test saw in a store across its lists: when
// each was stored, and in which order they were first seen.
type objectsSeen struct {
	at    map[string]time.Time
	order []string
}

func (s *objectsSeen) add(objs []framework.Object) {
	for _, o := range objs {
		if _, ok := s.at[o.Key]; !ok {
			s.at[o.Key] = o.LastModified
			s.order = append(s.order, o.Key)
		}
	}
}

// deployBackupOperator runs example/etcd-backup-operator/deployment.yaml in the
// shared namespace (its service account already has the ClusterRole from
// create_role.sh) and removes it at the end.
func deployBackupOperator(t *testing.T, file string) {
	t.Helper()
	ctx := t.Context()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := yaml.Unmarshal(raw, &d); err != nil {
		t.Fatalf("parse %s: %v", file, err)
	}
	var sed []string
	if f.Env.OperatorImage != "" {
		sed = append(sed, "s|image: openetcd/etcd-operator:.*|image: "+f.Env.OperatorImage+"|")
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if t.Failed() {
			t.Logf("======== backup operator log\n%s", lastLines(f.DeploymentLogs(ctx, opNS, d.Name), 100))
		}
		if err := f.Kube.AppsV1().Deployments(opNS).Delete(ctx, d.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleanup: delete deployment %s: %v", d.Name, err)
		}
	})
	if err := f.CreateFromExample(ctx, opNS, file, sed...); err != nil {
		t.Fatal(err)
	}
	if err := f.WaitDeploymentReady(ctx, opNS, d.Name, 1, framework.OperatorReadyTimeout); err != nil {
		t.Fatal(err)
	}
}

// createBackup creates an EtcdBackup and deletes it at the end, waiting for the
// backup operator to let go of it (periodic backups carry its finalizer). A
// finalizer nobody removes would hang the namespace's deletion, so it is taken
// off by force then, and the test fails.
func createBackup(t *testing.T, b *api.EtcdBackup) *api.EtcdBackup {
	t.Helper()
	return createBackupIn(t, opNS, b)
}

// createBackupIn is createBackup in namespace ns.
func createBackupIn(t *testing.T, ns string, b *api.EtcdBackup) *api.EtcdBackup {
	t.Helper()
	deleteBackupAtEnd(t, ns, b.Name)
	out, err := f.Etcd.EtcdV1beta2().EtcdBackups(ns).Create(t.Context(), b, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// deleteBackupAtEnd deletes the EtcdBackup name of ns when the test ends and
// waits for the backup operator to let go of it, taking its finalizer off by
// force, and failing the test, if it does not. Registered before the backup is
// created, and after the backup operator is deployed, so that it runs while
// the operator is still there.
func deleteBackupAtEnd(t *testing.T, ns, name string) {
	backups := f.Etcd.EtcdV1beta2().EtcdBackups(ns)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := backups.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleanup: delete EtcdBackup %s: %v", name, err)
			return
		}
		err := framework.WaitFor(ctx, time.Minute, framework.Poll, "EtcdBackup "+name+" to be deleted", func(ctx context.Context) (bool, string, error) {
			got, err := backups.Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, "", nil
			}
			if err != nil {
				return false, err.Error(), nil
			}
			return false, fmt.Sprintf("finalizers %v", got.Finalizers), nil
		})
		if err != nil {
			t.Errorf("the backup operator did not release its EtcdBackup: %v", err)
			_, _ = backups.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		}
	})
}
