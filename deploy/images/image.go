package main

import (
	"fmt"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// build is what every image is stamped with.
type build struct {
	registry string // e.g. ghcr.io/allotnet
	version  string
	commit   string
	date     time.Time // the commit's date: the image's created time and every file's mtime
	arch     string
}

// ref is the image reference the manifests name: registry/name:version.
func (b build) ref(s spec) string {
	return fmt.Sprintf("%s/%s:%s", b.registry, s.name, b.version)
}

// image assembles one image from scratch: a single layer of static
// binaries on an empty base, so nothing but allot's own files is inside.
func image(s spec, b build) (v1.Image, error) {
	l, err := layer(s.files, b.date)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", s.name, err)
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.AppendLayers(base, l)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", s.name, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture = b.arch
	cf.OS = "linux"
	cf.Created = v1.Time{Time: b.date}
	cf.History = nil
	cf.Config.Entrypoint = s.entrypoint
	cf.Config.User = s.user
	cf.Config.Env = []string{"PATH=/usr/local/bin"}
	cf.Config.Labels = map[string]string{
		"org.opencontainers.image.title":    s.name,
		"org.opencontainers.image.version":  b.version,
		"org.opencontainers.image.revision": b.commit,
		"org.opencontainers.image.created":  b.date.UTC().Format(time.RFC3339),
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", s.name, err)
	}
	return mutate.CreatedAt(img, v1.Time{Time: b.date})
}
