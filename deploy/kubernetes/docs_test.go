package kubernetes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestInstallGuideOverlayRenders renders the overlay docs/install.md tells
// an admin to write, against this base, and checks it does what it says.
func TestInstallGuideOverlayRenders(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs/install.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "# my-allot/kustomization.yaml\n")
	if i < 0 {
		t.Fatal("docs/install.md has no my-allot/kustomization.yaml block")
	}
	block := doc[i:]
	block = block[:strings.Index(block, "```")]
	base, err := filepath.Abs("base")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, base) // kustomize takes no absolute base
	if err != nil {
		t.Fatal(err)
	}
	block = strings.Replace(block, "../deploy/kubernetes/base", rel, 1)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(block), 0o644); err != nil {
		t.Fatal(err)
	}
	r := render(t, dir)
	broker := container(t, r.statefulSets["allot-broker"].Spec.Template.Spec.Containers, "broker")
	var cluster string
	for _, e := range broker.Env {
		if e.Name == "ALLOT_CLUSTER" {
			cluster = e.Value
		}
	}
	if cluster != "my-cluster" || len(broker.Env) < 3 {
		t.Errorf("ALLOT_CLUSTER %q with %d env vars: the guide's patch should set it and keep the rest", cluster, len(broker.Env))
	}
	if !strings.Contains(broker.Image, ".dkr.ecr.") {
		t.Errorf("broker image %s: the guide's images entry should point it at ECR", broker.Image)
	}
	var agents []corev1.Container
	for _, d := range r.daemonSets {
		agents = append(agents, d.Spec.Template.Spec.Containers...)
	}
	if len(agents) == 0 || !strings.Contains(agents[0].Image, ".dkr.ecr.") {
		t.Errorf("agent containers %v: want the ECR image", agents)
	}
	if r.accounts["allot-broker"].Annotations["eks.amazonaws.com/role-arn"] == "" {
		t.Errorf("the guide's IRSA patch did not annotate the allot-broker ServiceAccount")
	}
}
