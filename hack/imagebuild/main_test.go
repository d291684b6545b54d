package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// makeRootFS creates a small root filesystem: an executable, a config file,
// a sticky /tmp and a symlink.
func makeRootFS(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "usr/local/bin"), 0o755))
	must(os.MkdirAll(filepath.Join(dir, "etc"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "usr/local/bin/hello"), []byte("#!/bin/true\n"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "etc/greeting"), []byte("hello, image\n"), 0o644))
	must(os.Mkdir(filepath.Join(dir, "tmp"), 0o755))
	must(os.Chmod(filepath.Join(dir, "tmp"), 0o777|os.ModeSticky))
	must(os.Symlink("usr/local/bin", filepath.Join(dir, "bin")))
	return dir
}

func TestBuildAndReadBack(t *testing.T) {
	rootfs := makeRootFS(t)
	out := filepath.Join(t.TempDir(), "img.tar")
	o := options{
		RootFS:     rootfs,
		Tag:        "quay.io/example/hello:v1.2.3",
		Output:     out,
		Arch:       "amd64",
		Entrypoint: []string{"/usr/local/bin/hello"},
		Cmd:        []string{"--flag", "value"},
		Env:        []string{"PATH=/usr/local/bin:/bin"},
		User:       "65532",
		WorkDir:    "/",
		Labels:     map[string]string{"org.example": "yes"},
		Created:    time.Unix(0, 0).UTC(),
		Owners:     map[string]owner{"/tmp": {65532, 65533}},
	}
	id, err := build(o)
	if err != nil {
		t.Fatalf("build: %v", err)
	}

	tag, err := name.NewTag(o.Tag)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatalf("read back with tag %s: %v", o.Tag, err)
	}
	if got, err := img.ConfigName(); err != nil || got != id {
		t.Errorf("config digest = %v (%v), want %v", got, err, id)
	}

	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Errorf("platform = %s/%s, want linux/amd64", cf.OS, cf.Architecture)
	}
	c := cf.Config
	if !slices.Equal(c.Entrypoint, o.Entrypoint) || !slices.Equal(c.Cmd, o.Cmd) ||
		!slices.Equal(c.Env, o.Env) || c.User != "65532" || c.WorkingDir != "/" ||
		c.Labels["org.example"] != "yes" {
		t.Errorf("unexpected config: %+v", c)
	}
	if len(cf.RootFS.DiffIDs) != 1 {
		t.Fatalf("want 1 layer diff id, got %d", len(cf.RootFS.DiffIDs))
	}

	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers = %d (%v), want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]*tar.Header{}
	var greeting []byte
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[hdr.Name] = hdr
		if hdr.Name == "etc/greeting" {
			if greeting, err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
	if string(greeting) != "hello, image\n" {
		t.Errorf("etc/greeting = %q", greeting)
	}
	if h := files["usr/local/bin/hello"]; h == nil || h.Mode&0o111 == 0 || h.Uid != 0 {
		t.Errorf("usr/local/bin/hello missing, not executable or not root-owned: %+v", h)
	}
	if h := files["tmp/"]; h == nil || h.Typeflag != tar.TypeDir || h.Mode&01000 == 0 ||
		h.Uid != 65532 || h.Gid != 65533 {
		t.Errorf("tmp/ missing, not sticky or not owned by 65532:65533: %+v", h)
	}
	if h := files["bin"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "usr/local/bin" {
		t.Errorf("bin symlink wrong: %+v", h)
	}
}

// Building the same directory twice must give the same bytes, so callers can
// skip re-importing an unchanged image by comparing checksums.
func TestBuildIsReproducible(t *testing.T) {
	rootfs := makeRootFS(t)
	dir := t.TempDir()
	var outputs [][]byte
	for i, mtime := range []time.Time{time.Now(), time.Now().Add(-time.Hour)} {
		// Touching the files must not change the result.
		if err := os.Chtimes(filepath.Join(rootfs, "etc/greeting"), mtime, mtime); err != nil {
			t.Fatal(err)
		}
		o := options{RootFS: rootfs, Tag: "example/repro:v1", Entrypoint: []string{"/x"},
			Output: filepath.Join(dir, "img"+string(rune('0'+i))+".tar"), Created: time.Unix(0, 0)}
		if _, err := build(o); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(o.Output)
		if err != nil {
			t.Fatal(err)
		}
		outputs = append(outputs, b)
	}
	if !bytes.Equal(outputs[0], outputs[1]) {
		t.Error("two builds of the same rootfs differ")
	}
}

func TestListFlag(t *testing.T) {
	var l listFlag
	for _, v := range []string{"/coredns", `["-conf", "/etc/Corefile"]`} {
		if err := l.Set(v); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"/coredns", "-conf", "/etc/Corefile"}; !slices.Equal(l, want) {
		t.Errorf("got %q, want %q", l, want)
	}
	if err := l.Set("[not json"); err == nil {
		t.Error("want an error for a malformed JSON array")
	}
}

func TestParseChown(t *testing.T) {
	p, o, err := parseChown("/home/app/=65532:65532")
	if err != nil || p != "/home/app" || o != (owner{65532, 65532}) {
		t.Errorf("got %q %v %v", p, o, err)
	}
	for _, bad := range []string{"home=1:2", "/x=1", "/x=a:b", "/x"} {
		if _, _, err := parseChown(bad); err == nil {
			t.Errorf("parseChown(%q): want an error", bad)
		}
	}
}

func TestBuildRejectsMissingRootFS(t *testing.T) {
	_, err := build(options{RootFS: filepath.Join(t.TempDir(), "nope"), Tag: "a/b:c",
		Output: filepath.Join(t.TempDir(), "x.tar")})
	if err == nil {
		t.Fatal("want an error for a missing rootfs")
	}
}

// make image builds an arm64 image on an amd64 machine: the config must say
// so, or a runtime on an arm64 node refuses (or silently drops) it.
func TestBuildForAnotherArchitecture(t *testing.T) {
	out := filepath.Join(t.TempDir(), "img.tar")
	o := options{RootFS: makeRootFS(t), Tag: "quay.io/example/hello:v1", Output: out, Arch: "arm64", Created: time.Unix(0, 0).UTC()}
	if _, err := build(o); err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag(o.Tag)
	img, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != "arm64" || cf.Variant != "v8" {
		t.Errorf("platform = %s/%s/%s, want linux/arm64/v8", cf.OS, cf.Architecture, cf.Variant)
	}
}
