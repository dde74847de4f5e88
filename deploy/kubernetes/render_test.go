package kubernetes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

const repoRoot = "../.."

// rendered is one kustomization's output, every object decoded strictly
// into its Kubernetes type.
type rendered struct {
	daemonSets   map[string]*appsv1.DaemonSet
	statefulSets map[string]*appsv1.StatefulSet
	services     map[string]*corev1.Service
	configMaps   map[string]*corev1.ConfigMap
	accounts     map[string]*corev1.ServiceAccount
	pdbs         map[string]*policyv1.PodDisruptionBudget
}

// render builds the kustomization in dir with kustomize's own Go API, as
// `kubectl apply -k` would.
func render(t *testing.T, dir string) *rendered {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	r := &rendered{
		daemonSets: map[string]*appsv1.DaemonSet{}, statefulSets: map[string]*appsv1.StatefulSet{},
		services: map[string]*corev1.Service{}, configMaps: map[string]*corev1.ConfigMap{},
		accounts: map[string]*corev1.ServiceAccount{}, pdbs: map[string]*policyv1.PodDisruptionBudget{},
	}
	for _, res := range m.Resources() {
		js, err := res.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if err := r.add(js); err != nil {
			t.Errorf("%s: %s %s: %v", dir, res.GetKind(), res.GetName(), err)
		}
	}
	return r
}

// add decodes one object into its type, failing on any field the type
// does not have (a typo, or a field of another Kubernetes version).
func (r *rendered) add(js []byte) error {
	var meta struct{ APIVersion, Kind string }
	if err := json.Unmarshal(js, &meta); err != nil {
		return err
	}
	var obj interface{ GetName() string }
	var store func()
	switch meta.APIVersion + " " + meta.Kind {
	case "apps/v1 DaemonSet":
		o := &appsv1.DaemonSet{}
		obj, store = o, func() { r.daemonSets[o.Name] = o }
	case "apps/v1 StatefulSet":
		o := &appsv1.StatefulSet{}
		obj, store = o, func() { r.statefulSets[o.Name] = o }
	case "v1 Service":
		o := &corev1.Service{}
		obj, store = o, func() { r.services[o.Name] = o }
	case "v1 ConfigMap":
		o := &corev1.ConfigMap{}
		obj, store = o, func() { r.configMaps[o.Name] = o }
	case "v1 ServiceAccount":
		o := &corev1.ServiceAccount{}
		obj, store = o, func() { r.accounts[o.Name] = o }
	case "policy/v1 PodDisruptionBudget":
		o := &policyv1.PodDisruptionBudget{}
		obj, store = o, func() { r.pdbs[o.Name] = o }
	default:
		return fmt.Errorf("unexpected object %s %s: the test knows no type for it", meta.APIVersion, meta.Kind)
	}
	if err := strictDecode(js, obj); err != nil {
		return err
	}
	store()
	return nil
}

func strictDecode(js []byte, into any) error {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	return dec.Decode(into)
}

// TestStrictDecodingCatchesTypos guards the guard: a misspelt field fails.
func TestStrictDecodingCatchesTypos(t *testing.T) {
	r := &rendered{daemonSets: map[string]*appsv1.DaemonSet{}}
	err := r.add([]byte(`{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"x"},
		"spec":{"template":{"spec":{"hostNetwrok":true}}}}`))
	if err == nil || !strings.Contains(err.Error(), "hostNetwrok") {
		t.Fatalf("a DaemonSet with hostNetwrok decoded: err = %v", err)
	}
}

// flagSets are the flags each binary defines, read from its -h output.
var (
	flagOnce sync.Once
	flagSets map[string]map[string]bool
	flagErr  error
)

var flagLine = regexp.MustCompile(`(?m)^\s+-([a-z0-9][a-z0-9-]*)`)

func binaryFlags(t *testing.T) map[string]map[string]bool {
	t.Helper()
	flagOnce.Do(func() {
		flagSets, flagErr = buildAndReadFlags(map[string]string{
			"allot-agent":       "./agent/cmd/allot-agent",
			"allot-broker":      "./broker/cmd/allot-broker",
			"allot-install-cni": "./cni/cmd/allot-install-cni",
		})
	})
	if flagErr != nil {
		t.Fatal(flagErr)
	}
	return flagSets
}

func buildAndReadFlags(pkgs map[string]string) (map[string]map[string]bool, error) {
	dir, err := os.MkdirTemp("", "allot-manifest-flags-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := map[string]map[string]bool{}
	for name, pkg := range pkgs {
		bin := filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-o", bin, pkg)
		cmd.Dir = repoRoot
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("build %s: %v\n%s", name, err, b)
		}
		// -h exits 2 after printing the flags to stderr; the output is what counts.
		help, _ := exec.Command(bin, "-h").CombinedOutput()
		set := map[string]bool{}
		for _, m := range flagLine.FindAllSubmatch(help, -1) {
			set[string(m[1])] = true
		}
		if len(set) == 0 {
			return nil, fmt.Errorf("%s -h listed no flags:\n%s", name, help)
		}
		out[name] = set
	}
	return out, nil
}
