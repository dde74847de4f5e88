package kubernetes

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// The monitoring objects are prometheus-operator's custom resources, which
// k8s.io/api has no types for. Rather than link the operator's module (and
// its dependencies) for two structs, these mirror the fields of its
// monitoring.coreos.com/v1 PodMonitor and PrometheusRule that allot's
// objects use, with the operator's JSON names; strict decoding then fails
// on anything else, a misspelt field included.
type podMonitor struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector struct {
			Any        bool     `json:"any,omitempty"`
			MatchNames []string `json:"matchNames,omitempty"`
		} `json:"namespaceSelector"`
		PodMetricsEndpoints []struct {
			Port        string `json:"port"`
			Path        string `json:"path"`
			Interval    string `json:"interval"`
			Relabelings []struct {
				SourceLabels []string `json:"sourceLabels"`
				TargetLabel  string   `json:"targetLabel"`
				Action       string   `json:"action,omitempty"`
				Regex        string   `json:"regex,omitempty"`
				Replacement  string   `json:"replacement,omitempty"`
			} `json:"relabelings"`
		} `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

type prometheusRule struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		Groups []struct {
			Name     string `json:"name"`
			Interval string `json:"interval,omitempty"`
			Rules    []struct {
				Alert         string            `json:"alert,omitempty"`
				Record        string            `json:"record,omitempty"`
				Expr          string            `json:"expr"`
				For           string            `json:"for,omitempty"`
				KeepFiringFor string            `json:"keep_firing_for,omitempty"`
				Labels        map[string]string `json:"labels,omitempty"`
				Annotations   map[string]string `json:"annotations,omitempty"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

// renderMonitoring builds deploy/kubernetes/monitoring and decodes its
// objects strictly.
func renderMonitoring(t *testing.T) []podMonitor {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), "monitoring")
	if err != nil {
		t.Fatalf("kustomize build monitoring: %v", err)
	}
	var pms []podMonitor
	for _, res := range m.Resources() {
		js, err := res.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var meta struct{ APIVersion, Kind string }
		if err := json.Unmarshal(js, &meta); err != nil {
			t.Fatal(err)
		}
		switch meta.APIVersion + " " + meta.Kind {
		case "monitoring.coreos.com/v1 PodMonitor":
			var pm podMonitor
			if err := strictDecode(js, &pm); err != nil {
				t.Errorf("PodMonitor %s: %v", res.GetName(), err)
			}
			pms = append(pms, pm)
		case "monitoring.coreos.com/v1 PrometheusRule":
			var pr prometheusRule
			if err := strictDecode(js, &pr); err != nil {
				t.Errorf("PrometheusRule %s: %v", res.GetName(), err)
			}
		default:
			t.Errorf("unexpected object %s %s", meta.APIVersion, meta.Kind)
		}
	}
	return pms
}

// TestPodMonitorsScrapeEveryBrokerAndAgent: a PodMonitor selects the
// broker's and the agent's pods as the base renders them, in their
// namespace, on the container port their --metrics-addr listens on, and
// labels agent series with the node's name.
func TestPodMonitorsScrapeEveryBrokerAndAgent(t *testing.T) {
	pms := renderMonitoring(t)
	r := render(t, "base")
	type target struct {
		labels    map[string]string
		namespace string
		args      map[string]string
		ports     map[string]int32
	}
	targets := map[string]target{}
	for name, ds := range r.daemonSets {
		c := container(t, ds.Spec.Template.Spec.Containers, "agent")
		targets[name] = target{ds.Spec.Template.Labels, ds.Namespace, argFlags(t, c.Args), portsOf(c.Ports)}
	}
	for name, ss := range r.statefulSets {
		c := container(t, ss.Spec.Template.Spec.Containers, "broker")
		targets[name] = target{ss.Spec.Template.Labels, ss.Namespace, argFlags(t, c.Args), portsOf(c.Ports)}
	}
	scraped := map[string]bool{}
	for _, pm := range pms {
		sel, err := metav1.LabelSelectorAsSelector(&pm.Spec.Selector)
		if err != nil {
			t.Fatalf("PodMonitor %s: %v", pm.Metadata.Name, err)
		}
		for name, tg := range targets {
			if !sel.Matches(labels.Set(tg.labels)) || !slices.Contains(pm.Spec.NamespaceSelector.MatchNames, tg.namespace) {
				continue
			}
			scraped[name] = true
			if len(pm.Spec.PodMetricsEndpoints) != 1 {
				t.Fatalf("PodMonitor %s: %d endpoints, want 1", pm.Metadata.Name, len(pm.Spec.PodMetricsEndpoints))
			}
			ep := pm.Spec.PodMetricsEndpoints[0]
			_, want, _ := strings.Cut(tg.args["metrics-addr"], ":")
			if got := fmt.Sprint(tg.ports[ep.Port]); got != want || ep.Path != "/metrics" {
				t.Errorf("PodMonitor %s scrapes %s port %q (%s) path %s; %s's --metrics-addr listens on %s",
					pm.Metadata.Name, name, ep.Port, got, ep.Path, name, want)
			}
			node := false
			for _, rl := range ep.Relabelings {
				node = node || (rl.TargetLabel == "node" && slices.Contains(rl.SourceLabels, "__meta_kubernetes_pod_node_name"))
			}
			if !node {
				t.Errorf("PodMonitor %s: no relabeling puts the node's name in a node label", pm.Metadata.Name)
			}
		}
	}
	for name := range targets {
		if !scraped[name] {
			t.Errorf("no PodMonitor scrapes %s", name)
		}
	}
}

func portsOf(ps []corev1.ContainerPort) map[string]int32 {
	out := map[string]int32{}
	for _, p := range ps {
		out[p.Name] = p.ContainerPort
	}
	return out
}
