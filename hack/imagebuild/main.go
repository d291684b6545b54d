// Command imagebuild turns a root filesystem directory into a container image
// tarball (the "docker save" layout) that `ctr -n k8s.io images import` and
// `docker load` accept. It needs neither a Docker engine nor a registry.
//
// The image has exactly one layer holding the whole directory, on top of an
// empty base, and a config with os=linux and the architecture of -arch (the
// build machine's by default; ctr import silently drops images whose platform
// does not match the host, so the files in the directory must be built for it).
//
// Example:
//
//	imagebuild -rootfs _output/rootfs -tag openetcd/etcd-operator:v0.1.0 \
//	    -entrypoint /usr/local/bin/etcd-operator -user 65532 \
//	    -env PATH=/usr/local/bin:/usr/bin:/bin -o _output/image.tar
//
// Files are stored as owned by root (0:0) whoever owns them on disk, so an
// unprivileged user can build images too; -chown /home/app=65532:65532 gives
// one path (not recursively) another owner, e.g. a non-root user's home.
//
// -entrypoint and -cmd may be repeated (one argument each) or given a JSON
// array such as '["/coredns","-conf","/etc/coredns/Corefile"]'.
//
// The output is reproducible: the same directory contents give a
// byte-identical tarball, because owners come from the flags, not the disk,
// and every file gets a fixed modification time ($SOURCE_DATE_EPOCH, or the
// Unix epoch).
//
// "imagebuild index" joins such tarballs, one per architecture, into one
// multi-architecture image: an OCI image layout in a tarball, which skopeo,
// crane and oras push to a registry as one tag:
//
//	imagebuild index -tag openetcd/etcd-operator:v0.2.0 -o _output/release/image.oci.tar \
//	    _output/etcd-operator-image-amd64.tar _output/etcd-operator-image-arm64.tar
package main

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// options describes one image to build.
type options struct {
	RootFS string
	Tag    string
	Output string
	// Arch is the GOARCH the root filesystem's binaries are built for.
	Arch       string
	Entrypoint []string
	Cmd        []string
	Env        []string
	User       string
	WorkDir    string
	Labels     map[string]string
	Created    time.Time
	// Owners maps an absolute path inside the image to its owner; every
	// other path is owned by root.
	Owners map[string]owner
}

type owner struct{ UID, GID int }

// parseChown parses "/path=UID:GID".
func parseChown(s string) (string, owner, error) {
	p, ids, ok := strings.Cut(s, "=")
	u, g, ok2 := strings.Cut(ids, ":")
	uid, err1 := strconv.Atoi(u)
	gid, err2 := strconv.Atoi(g)
	if !ok || !ok2 || err1 != nil || err2 != nil || !strings.HasPrefix(p, "/") {
		return "", owner{}, fmt.Errorf("bad -chown %q, want /path=UID:GID", s)
	}
	return filepath.Clean(p), owner{uid, gid}, nil
}

// listFlag collects a repeatable flag; a value that is a JSON array adds all
// of its elements at once.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, " ") }

func (l *listFlag) Set(v string) error {
	if strings.HasPrefix(strings.TrimSpace(v), "[") {
		var items []string
		if err := json.Unmarshal([]byte(v), &items); err != nil {
			return fmt.Errorf("not a JSON array of strings: %w", err)
		}
		*l = append(*l, items...)
		return nil
	}
	*l = append(*l, v)
	return nil
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "index" {
		mainIndex(os.Args[2:])
		return
	}
	var (
		o                            options
		entrypoint, cmd, env, labels listFlag
		chowns                       listFlag
	)
	flag.StringVar(&o.RootFS, "rootfs", "", "directory that becomes the image's root filesystem (required)")
	flag.StringVar(&o.Tag, "tag", "", "image reference, e.g. quay.io/coreos/etcd:v3.5.21 (required)")
	flag.StringVar(&o.Output, "o", "", "output tarball path (required)")
	flag.StringVar(&o.Arch, "arch", runtime.GOARCH, "architecture of the image (a GOARCH: amd64, arm64, ...)")
	flag.Var(&entrypoint, "entrypoint", "entrypoint argument (repeatable) or JSON array")
	flag.Var(&cmd, "cmd", "cmd argument (repeatable) or JSON array")
	flag.Var(&env, "env", "environment variable KEY=VALUE (repeatable)")
	flag.Var(&labels, "label", "image label KEY=VALUE (repeatable)")
	flag.StringVar(&o.User, "user", "", "user (and optional group) the container runs as, e.g. 65532 or 65532:65532")
	flag.StringVar(&o.WorkDir, "workdir", "", "working directory of the container")
	flag.Var(&chowns, "chown", "give one path in the image an owner: /path=UID:GID (repeatable)")
	flag.Parse()

	if o.RootFS == "" || o.Tag == "" || o.Output == "" || flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	o.Entrypoint, o.Cmd, o.Env = entrypoint, cmd, env
	o.Labels = map[string]string{}
	for _, kv := range labels {
		k, v, _ := strings.Cut(kv, "=")
		o.Labels[k] = v
	}
	o.Owners = map[string]owner{}
	for _, c := range chowns {
		p, own, err := parseChown(c)
		if err != nil {
			fatal(err)
		}
		o.Owners[p] = own
	}
	var err error
	if o.Created, err = sourceDateEpoch(); err != nil {
		fatal(err)
	}

	digest, err := build(o)
	if err != nil {
		fatal(err)
	}
	fmt.Printf("wrote %s (%s, image id %s)\n", o.Output, o.Tag, digest)
}

// mainIndex is "imagebuild index [flags] ARCHIVE...".
func mainIndex(args []string) {
	fset := flag.NewFlagSet("imagebuild index", flag.ExitOnError)
	var o indexOptions
	fset.StringVar(&o.Tag, "tag", "", "image reference whose tag names the image in the layout (required)")
	fset.StringVar(&o.Output, "o", "", "output OCI layout tarball path (required)")
	fset.Usage = func() {
		fmt.Fprintln(fset.Output(), "usage: imagebuild index -tag REF -o OUT.tar DOCKER-ARCHIVE.tar...")
		fset.PrintDefaults()
	}
	_ = fset.Parse(args)
	o.Archives = fset.Args()
	if o.Tag == "" || o.Output == "" || len(o.Archives) == 0 {
		fset.Usage()
		os.Exit(2)
	}
	var err error
	if o.Created, err = sourceDateEpoch(); err != nil {
		fatal(err)
	}
	digest, err := writeIndex(o)
	if err != nil {
		fatal(err)
	}
	fmt.Printf("wrote %s (%s, index %s)\n", o.Output, o.Tag, digest)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "imagebuild:", err)
	os.Exit(1)
}

// sourceDateEpoch returns the timestamp stored in the image: the
// reproducible-builds SOURCE_DATE_EPOCH when set, the Unix epoch otherwise.
func sourceDateEpoch() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	secs, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("bad SOURCE_DATE_EPOCH %q: %w", s, err)
	}
	return time.Unix(secs, 0).UTC(), nil
}

// build writes the image tarball described by o and returns the image's
// config digest (the "image id").
func build(o options) (v1.Hash, error) {
	tag, err := name.NewTag(o.Tag)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("bad tag: %w", err)
	}
	if fi, err := os.Stat(o.RootFS); err != nil || !fi.IsDir() {
		return v1.Hash{}, fmt.Errorf("rootfs %q is not a directory", o.RootFS)
	}

	// The layer is first written uncompressed to a temporary file;
	// go-containerregistry then gzips it while computing digests and writing.
	tmp, err := os.CreateTemp("", "imagebuild-layer-*.tar")
	if err != nil {
		return v1.Hash{}, err
	}
	defer os.Remove(tmp.Name())
	if err := writeLayer(tmp, o.RootFS, o.Created, o.Owners); err != nil {
		tmp.Close()
		return v1.Hash{}, fmt.Errorf("layer from %s: %w", o.RootFS, err)
	}
	if err := tmp.Close(); err != nil {
		return v1.Hash{}, err
	}
	layer, err := tarball.LayerFromFile(tmp.Name(), tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		return v1.Hash{}, err
	}

	// The config goes on the empty image first, so that appending the layer
	// fills in rootfs.diff_ids and history.
	arch := o.Arch
	if arch == "" {
		arch = runtime.GOARCH
	}
	cfg := &v1.ConfigFile{
		Architecture: arch,
		OS:           "linux",
		Created:      v1.Time{Time: o.Created},
		RootFS:       v1.RootFS{Type: "layers"},
		Config: v1.Config{
			Entrypoint: o.Entrypoint,
			Cmd:        o.Cmd,
			Env:        o.Env,
			User:       o.User,
			WorkingDir: o.WorkDir,
		},
	}
	if arch == "arm64" {
		// The OCI image index spec's variant for arm64; runtimes match on it.
		cfg.Variant = "v8"
	}
	if len(o.Labels) > 0 {
		cfg.Config.Labels = o.Labels
	}
	base, err := mutate.ConfigFile(empty.Image, cfg)
	if err != nil {
		return v1.Hash{}, err
	}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: o.Created},
			CreatedBy: "imagebuild -rootfs " + filepath.Base(o.RootFS),
		},
	})
	if err != nil {
		return v1.Hash{}, err
	}

	if err := os.MkdirAll(filepath.Dir(o.Output), 0o755); err != nil {
		return v1.Hash{}, err
	}
	// Write next to the destination and rename, so a reader never sees a
	// half-written tarball.
	part := o.Output + ".part"
	if err := tarball.WriteToFile(part, tag, img); err != nil {
		os.Remove(part)
		return v1.Hash{}, err
	}
	if err := os.Rename(part, o.Output); err != nil {
		return v1.Hash{}, err
	}
	return img.ConfigName()
}

// writeLayer writes dir as a tar stream in lexical order. Owners are reset to
// root (or what owners says) and times to mtime, so the result depends only
// on names, modes, contents and symlink targets.
func writeLayer(w io.Writer, dir string, mtime time.Time, owners map[string]owner) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		var link string
		switch mode := info.Mode(); {
		case mode.IsRegular(), mode.IsDir():
		case mode&fs.ModeSymlink != 0:
			if link, err = os.Readlink(path); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: unsupported file type %v", path, mode.Type())
		}

		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			hdr.Name += "/"
		}
		own := owners["/"+filepath.ToSlash(rel)]
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = own.UID, own.GID, "", ""
		hdr.ModTime, hdr.AccessTime, hdr.ChangeTime = mtime, time.Time{}, time.Time{}
		hdr.Format = tar.FormatPAX
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		n, err := io.Copy(tw, f)
		if err == nil && n != hdr.Size {
			err = errors.New(path + ": file changed while being archived")
		}
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
