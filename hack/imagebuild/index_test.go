package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The OCI media types the layout must use, spelled out rather than taken from
// the library that writes it.
const (
	ociIndexType    = "application/vnd.oci.image.index.v1+json"
	ociManifestType = "application/vnd.oci.image.manifest.v1+json"
	ociConfigType   = "application/vnd.oci.image.config.v1+json"
	ociLayerType    = "application/vnd.oci.image.layer.v1.tar+gzip"
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations"`
	Platform    *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
		Variant      string `json:"variant"`
	} `json:"platform"`
}

type index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []descriptor `json:"manifests"`
}

type manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        descriptor   `json:"config"`
	Layers        []descriptor `json:"layers"`
}

// buildArchImage writes a docker-archive tarball of a small root filesystem
// for linux/arch, as make image does for each architecture.
func buildArchImage(t *testing.T, arch string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "image-"+arch+".tar")
	o := options{RootFS: makeRootFS(t), Tag: "quay.io/example/hello:v1.2.3", Output: out, Arch: arch,
		Entrypoint: []string{"/usr/local/bin/hello"}, Created: time.Unix(0, 0).UTC()}
	if _, err := build(o); err != nil {
		t.Fatalf("build %s: %v", arch, err)
	}
	return out
}

// readTar returns the regular files of a tarball by name.
func readTar(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[hdr.Name] = data
	}
}

// blob returns the layout's blob for d, failing unless it is there with the
// size and the digest d gives.
func blob(t *testing.T, files map[string][]byte, d descriptor) []byte {
	t.Helper()
	hexDigest, ok := strings.CutPrefix(d.Digest, "sha256:")
	if !ok {
		t.Fatalf("digest %q is not sha256", d.Digest)
	}
	data, ok := files["blobs/sha256/"+hexDigest]
	if !ok {
		t.Fatalf("blob %s (%s) is not in the layout", d.Digest, d.MediaType)
	}
	if int64(len(data)) != d.Size {
		t.Errorf("blob %s has %d bytes, the descriptor says %d", d.Digest, len(data), d.Size)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != hexDigest {
		t.Errorf("blob %s has digest sha256:%x", d.Digest, sum)
	}
	return data
}

func decode(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%v in %s", err, data)
	}
}

// The release's image is one OCI layout: index.json names one image index by
// its tag, and that index lists the amd64 and arm64 manifests with their
// platforms; every blob is there under its digest, and the layers and configs
// are those of the per-architecture images, byte for byte.
func TestIndexJoinsPerArchitectureImagesIntoOneLayout(t *testing.T) {
	archives := map[string]string{"amd64": buildArchImage(t, "amd64"), "arm64": buildArchImage(t, "arm64")}
	out := filepath.Join(t.TempDir(), "image.oci.tar")
	digest, err := writeIndex(indexOptions{Tag: "quay.io/example/hello:v1.2.3", Output: out,
		Archives: []string{archives["amd64"], archives["arm64"]}, Created: time.Unix(0, 0).UTC()})
	if err != nil {
		t.Fatalf("writeIndex: %v", err)
	}
	files := readTar(t, out)

	var layoutFile struct {
		ImageLayoutVersion string `json:"imageLayoutVersion"`
	}
	decode(t, files["oci-layout"], &layoutFile)
	if layoutFile.ImageLayoutVersion != "1.0.0" {
		t.Errorf("oci-layout = %s, want imageLayoutVersion 1.0.0", files["oci-layout"])
	}
	var top index
	decode(t, files["index.json"], &top)
	if top.SchemaVersion != 2 || len(top.Manifests) != 1 {
		t.Fatalf("index.json = %s, want schemaVersion 2 and one image index", files["index.json"])
	}
	named := top.Manifests[0]
	if named.MediaType != ociIndexType || named.Annotations[refNameAnnotation] != "v1.2.3" {
		t.Errorf("index.json lists %s named %q, want an OCI index named v1.2.3", named.MediaType, named.Annotations[refNameAnnotation])
	}
	if named.Digest != digest.String() {
		t.Errorf("index.json names %s, writeIndex returned %s", named.Digest, digest)
	}

	var multi index
	decode(t, blob(t, files, named), &multi)
	if multi.MediaType != ociIndexType || len(multi.Manifests) != 2 {
		t.Fatalf("image index = %+v, want an OCI index of two manifests", multi)
	}
	wantVariant := map[string]string{"amd64": "", "arm64": "v8"}
	for _, d := range multi.Manifests {
		if d.MediaType != ociManifestType || d.Platform == nil {
			t.Errorf("manifest %s is %s with platform %v, want an OCI manifest with a platform", d.Digest, d.MediaType, d.Platform)
			continue
		}
		arch := d.Platform.Architecture
		archive, ok := archives[arch]
		if !ok || d.Platform.OS != "linux" || d.Platform.Variant != wantVariant[arch] {
			t.Errorf("manifest %s is for %s/%s/%s, want linux/amd64 or linux/arm64/v8", d.Digest, d.Platform.OS, arch, d.Platform.Variant)
			continue
		}
		delete(archives, arch)

		var m manifest
		decode(t, blob(t, files, d), &m)
		if m.MediaType != ociManifestType || m.Config.MediaType != ociConfigType {
			t.Errorf("%s: manifest %s with config %s, want OCI types", arch, m.MediaType, m.Config.MediaType)
		}
		var cfg struct {
			OS           string `json:"os"`
			Architecture string `json:"architecture"`
		}
		decode(t, blob(t, files, m.Config), &cfg)
		if cfg.OS != "linux" || cfg.Architecture != arch {
			t.Errorf("%s: the config says %s/%s", arch, cfg.OS, cfg.Architecture)
		}

		img, err := tarball.ImageFromPath(archive, nil)
		if err != nil {
			t.Fatal(err)
		}
		if id, err := img.ConfigName(); err != nil || id.String() != m.Config.Digest {
			t.Errorf("%s: config %s, the per-architecture image's is %v (%v)", arch, m.Config.Digest, id, err)
		}
		layers, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Layers) != len(layers) {
			t.Fatalf("%s: %d layers, the per-architecture image has %d", arch, len(m.Layers), len(layers))
		}
		for i, l := range m.Layers {
			blob(t, files, l)
			want, err := layers[i].Digest()
			if err != nil {
				t.Fatal(err)
			}
			if l.MediaType != ociLayerType || l.Digest != want.String() {
				t.Errorf("%s: layer %d is %s %s, want %s %s", arch, i, l.MediaType, l.Digest, ociLayerType, want)
			}
		}
	}
	if len(archives) != 0 {
		t.Errorf("no manifest for %v", archives)
	}
}

// The same images give the same tarball, so that a release can be rebuilt
// and compared with the published checksums.
func TestIndexIsReproducible(t *testing.T) {
	archives := []string{buildArchImage(t, "amd64"), buildArchImage(t, "arm64")}
	var outputs [2][]byte
	for i := range outputs {
		out := filepath.Join(t.TempDir(), "image.oci.tar")
		if _, err := writeIndex(indexOptions{Tag: "example/hello:v1", Output: out, Archives: archives, Created: time.Unix(0, 0).UTC()}); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		outputs[i] = data
	}
	if !bytes.Equal(outputs[0], outputs[1]) {
		t.Error("two layouts of the same images differ")
	}
}

func TestIndexRefuses(t *testing.T) {
	amd64 := buildArchImage(t, "amd64")
	for _, tc := range []struct {
		name     string
		tag      string
		archives []string
		want     string
	}{
		{"two images of one platform, which would leave the runtime to pick one", "example/hello:v1", []string{amd64, amd64}, "are both linux/amd64"},
		{"no image at all", "example/hello:v1", nil, "no image"},
		{"a reference that is not a tag", "example/hello@sha256:" + strings.Repeat("0", 64), []string{amd64}, "bad tag"},
		{"an archive that is not there", "example/hello:v1", []string{filepath.Join(t.TempDir(), "missing.tar")}, "missing.tar"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "image.oci.tar")
			_, err := writeIndex(indexOptions{Tag: tc.tag, Output: out, Archives: tc.archives})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one saying %q", err, tc.want)
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s was written anyway (%v)", out, err)
			}
		})
	}
}
