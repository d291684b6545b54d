package main

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// refNameAnnotation names an image in an OCI layout's index.json; tools that
// read a layout (skopeo's oci-archive:PATH:TAG, oras --from-oci-layout) find
// the image by it.
const refNameAnnotation = "org.opencontainers.image.ref.name"

// indexOptions describes one multi-architecture image.
type indexOptions struct {
	// Tag is the image's reference; its tag becomes the layout's ref name.
	Tag string
	// Archives are docker-archive tarballs written by build, one per platform.
	Archives []string
	// Output is the OCI layout tarball to write.
	Output  string
	Created time.Time
}

// writeIndex writes the images of o.Archives as one OCI image layout, in a
// tarball (what `skopeo copy oci-archive:` reads): index.json lists one image
// index, named after the tag, and that index lists each image's manifest with
// its platform, as a registry serves a multi-architecture image. It returns
// the image index's digest, the one a registry will show for the tag.
//
// The images keep their layers and configs byte for byte; their manifests
// take the OCI media types, which every registry and runtime reads and which
// an OCI index is meant to list.
func writeIndex(o indexOptions) (v1.Hash, error) {
	tag, err := name.NewTag(o.Tag)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("bad tag: %w", err)
	}
	if len(o.Archives) == 0 {
		return v1.Hash{}, fmt.Errorf("no image to index")
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	seen := map[string]string{}
	for _, archive := range o.Archives {
		img, err := tarball.ImageFromPath(archive, nil)
		if err != nil {
			return v1.Hash{}, fmt.Errorf("read %s: %w", archive, err)
		}
		oci, platform, err := asOCIImage(img)
		if err != nil {
			return v1.Hash{}, fmt.Errorf("%s: %w", archive, err)
		}
		// Two images of one platform would leave the runtime to pick one.
		if other, ok := seen[platform.String()]; ok {
			return v1.Hash{}, fmt.Errorf("%s and %s are both %s", other, archive, platform)
		}
		seen[platform.String()] = archive
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: oci, Descriptor: v1.Descriptor{Platform: platform}})
	}
	digest, err := idx.Digest()
	if err != nil {
		return v1.Hash{}, err
	}

	dir, err := os.MkdirTemp("", "imagebuild-layout-*")
	if err != nil {
		return v1.Hash{}, err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{refNameAnnotation: tag.TagStr()})); err != nil {
		return v1.Hash{}, err
	}

	if err := os.MkdirAll(filepath.Dir(o.Output), 0o755); err != nil {
		return v1.Hash{}, err
	}
	part := o.Output + ".part"
	if err := tarDirectory(part, dir, o.Created); err != nil {
		os.Remove(part)
		return v1.Hash{}, err
	}
	return digest, os.Rename(part, o.Output)
}

// asOCIImage returns img with OCI media types, and the platform its config
// says it runs on.
func asOCIImage(img v1.Image) (v1.Image, *v1.Platform, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, nil, err
	}
	if cf.OS == "" || cf.Architecture == "" {
		return nil, nil, fmt.Errorf("the image's config names no platform (os %q, architecture %q)", cf.OS, cf.Architecture)
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	adds := make([]mutate.Addendum, len(layers))
	for i, l := range layers {
		adds[i] = mutate.Addendum{Layer: l, MediaType: types.OCILayer}
	}
	withLayers, err := mutate.Append(base, adds...)
	if err != nil {
		return nil, nil, err
	}
	// The original config, with its diff_ids and history, replaces the one
	// Append made up.
	oci, err := mutate.ConfigFile(withLayers, cf)
	if err != nil {
		return nil, nil, err
	}
	return oci, &v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant}, nil
}

// tarDirectory writes dir as a tar file at path, in lexical order, owned by
// root with modes 0644/0755 and the time mtime, so that the same layout gives
// the same bytes.
func tarDirectory(path, dir string, mtime time.Time) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mtime, Format: tar.FormatPAX}
		if d.IsDir() {
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
			return tw.WriteHeader(hdr)
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: unexpected file type %v in the layout", p, d.Type())
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, info.Size()
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
