package store

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestEtcdDocListsEveryKey: docs/etcd.md's key layout lists every key the
// broker writes, as the code defines them: each record kind here (the
// constants named kind…), the store ID and election keys (…Name), and the
// keys broker/auth keeps beside them (its constants named key…); and it
// lists nothing the code no longer defines.
func TestEtcdDocListsEveryKey(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "etcd.md"))
	if err != nil {
		t.Fatal(err)
	}
	listed := layoutKeys(t, string(doc))
	var want []string // key prefixes the code writes, relative to the cluster's
	for name, v := range stringConsts(t, ".") {
		switch {
		case strings.HasPrefix(name, "kind"):
			want = append(want, v+"/")
		case strings.HasSuffix(name, "Name"):
			want = append(want, v)
		}
	}
	auth := stringConsts(t, filepath.Join("..", "auth"))
	if auth["keyDir"] == "" {
		t.Fatal("broker/auth defines no keyDir constant: where are its keys?")
	}
	for name, v := range auth {
		if strings.HasPrefix(name, "key") && name != "keyDir" {
			want = append(want, auth["keyDir"]+v)
		}
	}
	if len(want) < 12 {
		t.Fatalf("found only %d key constants (%v): has the naming changed?", len(want), want)
	}
	for _, w := range want {
		found := false
		for _, l := range listed {
			found = found || l == w || strings.HasPrefix(l, strings.TrimSuffix(w, "/")+"/")
		}
		if !found {
			t.Errorf("docs/etcd.md does not list the key %s (listed: %v)", w, listed)
		}
	}
	for _, l := range listed {
		found := false
		for _, w := range want {
			found = found || l == w || strings.HasPrefix(l, strings.TrimSuffix(w, "/")+"/")
		}
		if !found {
			t.Errorf("docs/etcd.md lists %s, which no key constant defines", l)
		}
	}
}

// layoutKeys returns the first word of each line of the fenced block that
// starts with the cluster prefix.
func layoutKeys(t *testing.T, doc string) []string {
	t.Helper()
	_, block, ok := strings.Cut(doc, "```\n/allot/v1/<cluster>/\n")
	if !ok {
		t.Fatal("docs/etcd.md has no key layout block starting /allot/v1/<cluster>/")
	}
	block, _, _ = strings.Cut(block, "```")
	var out []string
	for line := range strings.Lines(block) {
		if f := strings.Fields(line); len(f) > 0 {
			out = append(out, f[0])
		}
	}
	return out
}

// stringConsts returns the string constants declared in the non-test Go
// files of dir, by name.
func stringConsts(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						if v, err := strconv.Unquote(lit.Value); err == nil {
							out[n.Name] = v
						}
					}
				}
			}
		}
	}
	return out
}
