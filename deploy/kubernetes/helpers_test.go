package kubernetes

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func container(t *testing.T, cs []corev1.Container, name string) corev1.Container {
	t.Helper()
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %s", name)
	return corev1.Container{}
}

// findPrefix finds a generated name (kustomize appends a content hash).
func findPrefix[T any](t *testing.T, m map[string]T, prefix string) string {
	t.Helper()
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			return k
		}
	}
	t.Fatalf("no object named %s*", prefix)
	return ""
}

// hostPathAt returns the host path under which p, a path in container c,
// lies ("" if none): the hostPath volume mounted above p, plus the rest.
func hostPathAt(spec corev1.PodSpec, c corev1.Container, p string) string {
	for _, m := range c.VolumeMounts {
		rel, ok := strings.CutPrefix(p, m.MountPath)
		if !ok || (rel != "" && !strings.HasPrefix(rel, "/")) {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.HostPath != nil {
				return v.HostPath.Path + rel
			}
		}
	}
	return ""
}

func onHostAtSamePath(spec corev1.PodSpec, c corev1.Container, p string) bool {
	return p != "" && hostPathAt(spec, c, p) == p
}

func envFromField(c corev1.Container, name, field string) bool {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == field {
			return true
		}
	}
	return false
}
