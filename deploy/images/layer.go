package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// layer is one tar layer holding files and their parent directories, every
// entry owned by root with mtime at date, in a fixed order: the same files
// give the same bytes, hence the same digest.
func layer(files []file, date time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range parentDirs(files) {
		if err := tw.WriteHeader(header(d+"/", tar.TypeDir, 0o755, 0, date)); err != nil {
			return nil, err
		}
	}
	sorted := append([]file(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].dst < sorted[j].dst })
	for _, f := range sorted {
		data, err := os.ReadFile(f.src)
		if err != nil {
			return nil, fmt.Errorf("image file %s: %w", f.dst, err)
		}
		if err := tw.WriteHeader(header(f.dst, tar.TypeReg, f.mode, int64(len(data)), date)); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

func header(name string, typ byte, mode, size int64, date time.Time) *tar.Header {
	return &tar.Header{
		Name: strings.TrimPrefix(name, "/"), Typeflag: typ, Mode: mode, Size: size,
		ModTime: date, Uid: 0, Gid: 0,
	}
}

// parentDirs lists every directory above the files, parents first.
func parentDirs(files []file) []string {
	seen := map[string]bool{}
	for _, f := range files {
		for d := path.Dir(f.dst); d != "/" && d != "."; d = path.Dir(d) {
			seen[d] = true
		}
	}
	out := make([]string, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	sort.Strings(out) // "/etc" sorts before "/etc/allot"
	return out
}
