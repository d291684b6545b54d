package restore

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup/archive"
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
)

// pointInProgress is a restore in progress whose plan replays the archive
// under prefix from revision after+1 to upTo, with chunks' names digest.
func pointInProgress(name string, srv *backuptest.S3, after, upTo int64, digest string) *api.EtcdRestore {
	er := inProgress(testNamespace, name, "good.db", int64(len(snapshot)), srv)
	plan, _, err := PlanOf(er)
	if err != nil {
		panic(err)
	}
	plan.Point = &PointPlan{Point: api.RestorePointInTime{Revision: upTo}, SnapshotRevision: after, Revision: upTo,
		Prefix: "etcd/prod.archive/", ChunksSHA256: digest}
	raw, err := plan.encode()
	if err != nil {
		panic(err)
	}
	er.Annotations[PlanAnnotation] = raw
	er.Annotations[PlanMACAnnotation] = planMAC(testToken, raw)
	return er
}

// The archive endpoint serves the seed of a restore to a point the manifest
// of the chunks its plan replays and those chunks, as stored; nothing else in
// the bucket, nothing to a client without the token, nothing for a restore
// that replays no archive, and no manifest once the chunks changed since the
// restore checked them.
func TestBackupServerServesTheArchiveARestoreReplays(t *testing.T) {
	srv, store := startS3(t)
	putObject(t, store, "good.db", snapshot)
	at := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	var chunks []archive.Chunk
	for _, r := range [][2]int64{{101, 150}, {151, 200}, {201, 260}} {
		c := archive.Chunk{First: r[0], Last: r[1], Time: at, SHA256: strings.Repeat("b", 64)}
		c.Key = archive.ChunkName("etcd/prod.archive/", c)
		putObject(t, store, c.Key, []byte(c.Key))
		chunks = append(chunks, c)
	}
	planned := ChunkListDigest(chunks[:2])
	base := serveBackups(t, false, nil,
		pointInProgress("point", srv, 100, 180, planned),
		pointInProgress("changed", srv, 100, 180, ChunkListDigest(chunks[:1])),
		inProgress(testNamespace, "plain", "good.db", int64(len(snapshot)), srv),
	)
	name := func(c archive.Chunk) string { return strings.TrimPrefix(c.Key, "etcd/prod.archive/") }

	code, body := get(t, base+"/v1/archive/ns/point")
	if code != http.StatusOK {
		t.Fatalf("manifest: %d %s", code, body)
	}
	var m ArchiveManifest
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	if m.After != 100 || m.Revision != 180 || len(m.Chunks) != 2 || m.Chunks[0].Name != name(chunks[0]) || m.Chunks[1].Name != name(chunks[1]) {
		t.Errorf("manifest %+v, want chunks 101-150 and 151-200 of revisions 101 to 180", m)
	}

	tests := []struct {
		name, path, authorization string
		code                      int
		body                      string
	}{
		{"a chunk of the plan, as stored", "/v1/archive/ns/point/" + name(chunks[1]), "token", http.StatusOK, chunks[1].Key},
		{"a chunk past the point", "/v1/archive/ns/point/" + name(chunks[2]), "token", http.StatusNotFound, "not a chunk of revisions 101 to 180"},
		{"another object of the bucket", "/v1/archive/ns/point/good.db", "token", http.StatusNotFound, "not a chunk"},
		{"an object outside the prefix", "/v1/archive/ns/point/..%2Fgood.db", "token", http.StatusNotFound, ""},
		{"a path below a chunk", "/v1/archive/ns/point/" + name(chunks[1]) + "/x", "token", http.StatusNotFound, refusal},
		{"the manifest without the token", "/v1/archive/ns/point", "", http.StatusNotFound, refusal},
		{"a chunk without the token", "/v1/archive/ns/point/" + name(chunks[1]), "", http.StatusNotFound, refusal},
		{"a restore that replays no archive", "/v1/archive/ns/plain", "token", http.StatusNotFound, refusal},
		{"the archive changed since the restore checked it", "/v1/archive/ns/changed", "token", http.StatusConflict, "changed since the restore checked them"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			auth := ""
			if tc.authorization != "" {
				auth = "Bearer " + string(testToken)
			}
			code, body := getWith(t, base+tc.path, auth)
			if code != tc.code || !strings.Contains(string(body), tc.body) {
				t.Errorf("GET %s = %d %q, want %d with %q", tc.path, code, body, tc.code, tc.body)
			}
		})
	}

	if err := store.Delete(t.Context(), chunks[0].Key); err != nil {
		t.Fatal(err)
	}
	if code, body := get(t, base+"/v1/archive/ns/point/"+name(chunks[0])); code != http.StatusGone {
		t.Errorf("a chunk deleted since the restore checked it: %d %q, want 410", code, body)
	}
	if code, body := get(t, base+"/v1/archive/ns/point"); code != http.StatusConflict || !strings.Contains(string(body), "lacks revisions 101 to 150") {
		t.Errorf("the manifest of an archive that lost a chunk: %d %q, want 409 naming the hole", code, body)
	}
}
