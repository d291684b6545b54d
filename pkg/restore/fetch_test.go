package restore

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fetchFrom fetches from a server whose handler is h and returns 0 or 1 as
// the subcommand exits, the error's message and the downloaded file (nil if
// none). extra changes the options.
func fetchFrom(t *testing.T, h http.HandlerFunc, extra ...func(*FetchOptions)) (int, string, []byte) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	out := filepath.Join(dir, "latest.backup")
	var log bytes.Buffer
	o := FetchOptions{
		URL:     srv.URL + "/v1/backup/ns/example",
		Out:     out,
		Size:    int64(len(snapshot)),
		SHA256:  sha256Hex(snapshot),
		Timeout: 20 * time.Minute,
		Log:     &log,
	}
	for _, e := range extra {
		e(&o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code, msg := 0, ""
	if err := Fetch(ctx, o); err != nil {
		code, msg = 1, err.Error()
	}
	t.Logf("fetch output:\n%s", log.String())
	data, err := os.ReadFile(out)
	if err != nil {
		data = nil
	}
	// A failed or partial download never leaves a file behind under any name.
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != "latest.backup" {
			t.Errorf("leftover file %s", e.Name())
		}
	}
	return code, msg, data
}

func serve(data []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		_, _ = w.Write(data)
	}
}

func TestFetchGoodDownload(t *testing.T) {
	code, msg, data := fetchFrom(t, serve(snapshot))
	if code != 0 || msg != "" {
		t.Fatalf("exit %d, termination message %q", code, msg)
	}
	if !bytes.Equal(data, snapshot) {
		t.Fatal("the downloaded file differs from the backup")
	}
}

func TestFetchRefusesWhatWasNotVerified(t *testing.T) {
	flipped := bytes.Clone(snapshot)
	flipped[10] ^= 1
	tests := []struct {
		name string
		h    http.HandlerFunc
		want string
	}{
		{"size mismatch", serve(snapshot[:len(snapshot)-1]), fmt.Sprintf("announces %d bytes, but the verified backup has %d", len(snapshot)-1, len(snapshot))},
		{"size mismatch without a length announced", func(w http.ResponseWriter, _ *http.Request) {
			w.(http.Flusher).Flush() // chunked: no Content-Length
			_, _ = w.Write(snapshot[:100])
		}, fmt.Sprintf("downloaded 100 bytes, but the verified backup has %d", len(snapshot))},
		{"sha256 mismatch", serve(flipped), "the downloaded backup has sha256 "},
		{"sha256 mismatch is not retried", serve(flipped), "(attempt 1)"},
		{"HTTP 404 is final", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "EtcdRestore ns/example is Failed; only the backups of restores in progress are served", http.StatusNotFound)
		}, "the backup server answered 404 Not Found: EtcdRestore ns/example is Failed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, msg, data := fetchFrom(t, tc.h)
			if code != 1 {
				t.Fatalf("exit %d, want 1", code)
			}
			if !strings.Contains(msg, tc.want) {
				t.Errorf("termination message %q does not contain %q", msg, tc.want)
			}
			if data != nil {
				t.Error("a backup that failed its checks was written to --out")
			}
		})
	}
}

func TestFetchGivesUpOnHTTP500AtTheTimeout(t *testing.T) {
	var calls atomic.Int32
	code, msg, data := fetchFrom(t, func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		http.Error(w, "open the backup store: connection refused", http.StatusInternalServerError)
	}, func(o *FetchOptions) { o.Timeout = 1500 * time.Millisecond })
	if code != 1 || data != nil {
		t.Fatalf("exit %d, file written %v", code, data != nil)
	}
	for _, want := range []string{"gave up after", "500 Internal Server Error: open the backup store: connection refused"} {
		if !strings.Contains(msg, want) {
			t.Errorf("termination message %q does not contain %q", msg, want)
		}
	}
	if calls.Load() < 2 {
		t.Errorf("%d attempts: a 500 must be retried", calls.Load())
	}
}

// The operator may be restarting or changing leader when the seed asks, or the
// connection may break: failures that may pass are retried.
func TestFetchRetriesUntilItGetsTheBackup(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch calls.Add(1) {
		case 1:
			http.Error(w, "not leading", http.StatusServiceUnavailable)
		case 2:
			// Cut short: the announced length is never reached.
			w.Header().Set("Content-Length", strconv.Itoa(len(snapshot)))
			_, _ = w.Write(snapshot[:len(snapshot)/2])
		default:
			serve(snapshot)(w, r)
		}
	}))
	defer srv.Close()
	out := filepath.Join(t.TempDir(), "latest.backup")
	err := Fetch(context.Background(), FetchOptions{
		URL: srv.URL, Out: out, Size: int64(len(snapshot)), SHA256: sha256Hex(snapshot),
		Timeout: time.Minute, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(out); !bytes.Equal(got, snapshot) || calls.Load() != 3 {
		t.Fatalf("after %d calls the file is %d bytes", calls.Load(), len(got))
	}
}

func TestFetchPresentsTheTokenAndLeavesTheBackupReadableByTheRestoreStep(t *testing.T) {
	tokenPath := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenPath, []byte("the-token\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	var got atomic.Value
	h := func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Authorization"))
		serve(snapshot)(w, r)
	}
	srv := httptest.NewServer(http.HandlerFunc(h))
	t.Cleanup(srv.Close)
	out := filepath.Join(t.TempDir(), "latest.backup")
	err := Fetch(context.Background(), FetchOptions{URL: srv.URL, Out: out, Size: int64(len(snapshot)), SHA256: sha256Hex(snapshot), TokenFile: tokenPath, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := got.Load().(string); a != "Bearer the-token" {
		t.Errorf("Authorization %q, want the token from the file", a)
	}
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v: the restore step, another user without CAP_DAC_OVERRIDE, cannot read it", fi.Mode().Perm())
	}
}

func TestFetchWithoutItsTokenFileFailsAtOnce(t *testing.T) {
	err := Fetch(context.Background(), FetchOptions{URL: "http://127.0.0.1:1", Out: filepath.Join(t.TempDir(), "x"), Size: 1,
		SHA256: sha256Hex(snapshot), TokenFile: filepath.Join(t.TempDir(), "missing"), Timeout: time.Minute})
	if err == nil || !strings.Contains(err.Error(), "token") {
		t.Fatalf("err %v", err)
	}
}
