package storage

import (
	"bytes"
	"context"
	"encoding/base64"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup/absstore"
	"github.com/openetcd/etcd-operator/pkg/backup/gcsstore"
	"github.com/openetcd/etcd-operator/pkg/backup/s3store"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
)

func secret(name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func TestForBackup(t *testing.T) {
	goodAWS := secret("aws", map[string]string{
		"credentials": "[default]\naws_access_key_id = A\naws_secret_access_key = B\n",
		"config":      "[default]\nregion = eu-west-1\n",
	})
	noRegion := secret("aws-noregion", map[string]string{
		"credentials": "[default]\naws_access_key_id = A\naws_secret_access_key = B\n",
	})
	goodOSS := secret("oss", map[string]string{"accessKeyID": "id", "accessKeySecret": "secret"})
	halfOSS := secret("oss-half", map[string]string{"accessKeyID": "id"})
	goodABS := secret("abs", map[string]string{"storage-account": "acct", "storage-key": "a2V5", "cloud": "AzureChinaCloud"})
	halfABS := secret("abs-half", map[string]string{"storage-account": "acct"})
	marsABS := secret("abs-mars", map[string]string{"storage-account": "acct", "storage-key": "a2V5", "cloud": "Mars"})
	tokenGCP := secret("gcp", map[string]string{"access-token": "ya29.token"})
	emptyGCP := secret("gcp-empty", map[string]string{"other": "x"})
	objects := []runtime.Object{goodAWS, noRegion, goodOSS, halfOSS, goodABS, halfABS, marsABS, tokenGCP, emptyGCP}

	s3 := func(path, secretName string) api.BackupSpec {
		return api.BackupSpec{StorageType: api.BackupStorageTypeS3,
			BackupSource: api.BackupSource{S3: &api.S3BackupSource{Path: path, AWSSecret: secretName}}}
	}
	oss := func(path, secretName, endpoint string) api.BackupSpec {
		return api.BackupSpec{StorageType: api.BackupStorageTypeOSS,
			BackupSource: api.BackupSource{OSS: &api.OSSBackupSource{Path: path, OSSSecret: secretName, Endpoint: endpoint}}}
	}
	abs := func(path, secretName, endpoint string) api.BackupSpec {
		return api.BackupSpec{StorageType: api.BackupStorageTypeABS,
			BackupSource: api.BackupSource{ABS: &api.ABSBackupSource{Path: path, ABSSecret: secretName, Endpoint: endpoint}}}
	}
	gcs := func(path, secretName, endpoint string) api.BackupSpec {
		return api.BackupSpec{StorageType: api.BackupStorageTypeGCS,
			BackupSource: api.BackupSource{GCS: &api.GCSBackupSource{Path: path, GCPSecret: secretName, Endpoint: endpoint}}}
	}
	tests := []struct {
		name      string
		spec      api.BackupSpec
		wantLoc   Location
		wantErr   string
		permanent bool
	}{
		{name: "S3 with a complete secret", spec: s3("bucket/a/b", "aws"), wantLoc: Location{"bucket", "a/b"}},
		{name: "OSS with the default endpoint", spec: oss("bkt/key", "oss", ""), wantLoc: Location{"bkt", "key"}},
		{name: "OSS with a custom regional endpoint", spec: oss("bkt/key", "oss", "https://oss-us-west-1.aliyuncs.com"), wantLoc: Location{"bkt", "key"}},
		{name: "ABS in another cloud", spec: abs("container/a/blob", "abs", ""), wantLoc: Location{"container", "a/blob"}},
		{name: "ABS on Azurite", spec: abs("container/blob", "abs", "http://azurite:10000/devstoreaccount1"), wantLoc: Location{"container", "blob"}},
		{name: "ABS secret missing the key", spec: abs("c/b", "abs-half", ""), wantErr: "the ABS secret ns/abs-half has no storage-key", permanent: true},
		{name: "ABS secret naming an unknown cloud", spec: abs("c/b", "abs-mars", ""), wantErr: `unknown Azure cloud "Mars"`, permanent: true},
		{name: "ABS without its block", spec: api.BackupSpec{StorageType: api.BackupStorageTypeABS}, wantErr: "storage type ABS needs spec.abs", permanent: true},
		{name: "GCS with an access token", spec: gcs("bucket/obj", "gcp", ""), wantLoc: Location{"bucket", "obj"}},
		{name: "GCS emulator without a secret", spec: gcs("bucket/obj", "", "http://fake-gcs:4443"), wantLoc: Location{"bucket", "obj"}},
		{name: "GCS secret with neither key", spec: gcs("b/o", "gcp-empty", ""), wantErr: "has neither access-token nor credentials.json", permanent: true},
		{name: "GCS secret that does not exist yet", spec: gcs("b/o", "later", ""), wantErr: "secret ns/later (spec.gcs.gcpSecret) not found"},
		{name: "GCS without its block", spec: api.BackupSpec{StorageType: api.BackupStorageTypeGCS}, wantErr: "storage type GCS needs spec.gcs", permanent: true},
		{name: "unknown storage type", spec: api.BackupSpec{StorageType: "FTP"}, wantErr: `unknown storage type "FTP"`, permanent: true},
		{name: "S3 without its block", spec: api.BackupSpec{StorageType: api.BackupStorageTypeS3}, wantErr: "needs spec.s3", permanent: true},
		{name: "OSS without its block", spec: api.BackupSpec{StorageType: api.BackupStorageTypeOSS}, wantErr: "needs spec.oss", permanent: true},
		{name: "path without a key", spec: s3("bucket", "aws"), wantErr: `spec.s3: path "bucket" is not`, permanent: true},
		{name: "path with an empty bucket", spec: s3("/key", "aws"), wantErr: `path "/key" is not`, permanent: true},
		{name: "no secret named", spec: s3("b/k", ""), wantErr: "spec.s3.awsSecret names no secret", permanent: true},
		{name: "missing secret may still appear", spec: s3("b/k", "later"), wantErr: "secret ns/later (spec.s3.awsSecret) not found"},
		{name: "missing region", spec: s3("b/k", "aws-noregion"),
			wantErr: "the AWS config in secret ns/aws-noregion has no region for profile default; add `region = ...`", permanent: true},
		{name: "OSS secret missing a key", spec: oss("b/k", "oss-half", ""), wantErr: "the OSS secret ns/oss-half has no accessKeySecret", permanent: true},
		{name: "OSS endpoint without a region", spec: oss("b/k", "oss", "https://cdn.example.com"), wantErr: "cannot tell the OSS region", permanent: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kube := fake.NewSimpleClientset(objects...)
			store, loc, err := ForBackup(context.Background(), kube.CoreV1(), CloudIdentity{}, "ns", &tc.spec)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				if got := failure.IsPermanent(err); got != tc.permanent {
					t.Fatalf("permanent = %v, want %v (%v)", got, tc.permanent, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if loc != tc.wantLoc {
				t.Fatalf("location %+v, want %+v", loc, tc.wantLoc)
			}
			var bucket string
			switch s := store.(type) {
			case *s3store.Store:
				bucket = s.Bucket()
			case *absstore.Store:
				bucket = s.Container()
			case *gcsstore.Store:
				bucket = s.Bucket()
			}
			if bucket != tc.wantLoc.Bucket {
				t.Fatalf("store %T for bucket %q, want %q", store, bucket, tc.wantLoc.Bucket)
			}
		})
	}
}

func TestLocationPath(t *testing.T) {
	if got := (Location{"b", "k/x"}).Path(); got != "b/k/x" {
		t.Fatalf("Path = %q", got)
	}
}

func TestForRestoreOpensWhatTheBackupWrote(t *testing.T) {
	kube := fake.NewSimpleClientset(secret("abs", map[string]string{"storage-account": "acct", "storage-key": "a2V5"}))
	spec := &api.RestoreSpec{BackupStorageType: api.BackupStorageTypeABS,
		RestoreSource: api.RestoreSource{ABS: &api.ABSRestoreSource{Path: "c/snap", ABSSecret: "abs", Endpoint: "http://azurite:10000/acct"}}}
	store, loc, err := ForRestore(context.Background(), kube.CoreV1(), CloudIdentity{}, "ns", spec)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := store.(*absstore.Store); !ok || s.Container() != "c" || loc.Key != "snap" {
		t.Fatalf("ForRestore = %T %+v", store, loc)
	}
	_, _, err = ForRestore(context.Background(), kube.CoreV1(), CloudIdentity{}, "ns", &api.RestoreSpec{BackupStorageType: api.BackupStorageTypeGCS})
	if err == nil || !strings.Contains(err.Error(), "backupStorageType GCS needs spec.gcs") || !failure.IsPermanent(err) {
		t.Fatalf("restore without its gcs block: %v", err)
	}
}

func TestParseEncryptionKey(t *testing.T) {
	raw := bytes.Repeat([]byte{0xab}, 32)
	b64 := base64.StdEncoding.EncodeToString(raw) + "\n"
	for _, tc := range []struct {
		name string
		data []byte
		ok   bool
	}{
		{"32 raw bytes", raw, true},
		{"base64 with openssl's newline", []byte(b64), true},
		{"missing", nil, false},
		{"16 bytes", raw[:16], false},
		{"base64 of 16 bytes", []byte(base64.StdEncoding.EncodeToString(raw[:16])), false},
	} {
		key, err := ParseEncryptionKey(tc.data)
		if tc.ok != (err == nil) || tc.ok && !bytes.Equal(key, raw) {
			t.Errorf("%s: %x, %v", tc.name, key, err)
		}
	}
}

func TestSupportedTypesAndTheirMetricLabel(t *testing.T) {
	tests := []struct {
		name      string
		t         api.BackupStorageType
		supported bool
		label     string
	}{
		{"S3 is its own label", api.BackupStorageTypeS3, true, "S3"},
		{"OSS is its own label", api.BackupStorageTypeOSS, true, "OSS"},
		{"ABS is its own label", api.BackupStorageTypeABS, true, "ABS"},
		{"GCS is its own label", api.BackupStorageTypeGCS, true, "GCS"},
		{"a type a CRD without a schema let in is unknown", "ftp", false, "unknown"},
		{"an empty type is unknown", "", false, "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := CheckSupported(tt.t); (err == nil) != tt.supported {
				t.Errorf("CheckSupported(%q) = %v, want supported=%v", tt.t, err, tt.supported)
			}
			if got := MetricLabel(tt.t); got != tt.label {
				t.Errorf("MetricLabel(%q) = %q, want %q", tt.t, got, tt.label)
			}
		})
	}
}
