package kubernetes

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/allotnet/allot/cni/plugin"

	corev1 "k8s.io/api/core/v1"
)

var kustomizations = []string{"base", "overlays/external-etcd"}

// imageBinary is the binary a container runs: its command, else the
// image's entrypoint (deploy/images).
func imageBinary(c corev1.Container) string {
	if len(c.Command) > 0 {
		return path.Base(c.Command[0])
	}
	name := path.Base(c.Image)
	name, _, _ = strings.Cut(name, ":")
	return name
}

// argFlags maps each --flag in args to its value ("" for a bare flag).
func argFlags(t *testing.T, args []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			t.Errorf("argument %q is not a --flag=value", a)
			continue
		}
		k, v, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		out[k] = v
	}
	return out
}

func TestEveryContainerArgIsAFlagOfItsBinary(t *testing.T) {
	flags := binaryFlags(t)
	for _, dir := range kustomizations {
		r := render(t, dir)
		var pods []corev1.PodSpec
		for _, d := range r.daemonSets {
			pods = append(pods, d.Spec.Template.Spec)
		}
		for _, s := range r.statefulSets {
			pods = append(pods, s.Spec.Template.Spec)
		}
		for _, p := range pods {
			for _, c := range append(slices.Clone(p.InitContainers), p.Containers...) {
				bin := imageBinary(c)
				defined, ok := flags[bin]
				if !ok {
					t.Errorf("%s: container %s runs %s, which the test does not know", dir, c.Name, bin)
					continue
				}
				for f := range argFlags(t, c.Args) {
					if !defined[f] {
						t.Errorf("%s: container %s passes --%s, which %s does not define", dir, c.Name, f, bin)
					}
				}
			}
		}
	}
}

func TestConflistMatchesTheAgent(t *testing.T) {
	r := render(t, "base")
	cm := r.configMaps[findPrefix(t, r.configMaps, "allot-cni-config")]
	shipped, err := os.ReadFile(filepath.Join(repoRoot, "deploy/cni/10-allot.conflist"))
	if err != nil {
		t.Fatal(err)
	}
	data := cm.Data["10-allot.conflist"]
	if data != string(shipped) {
		t.Fatalf("the ConfigMap's conflist differs from deploy/cni/10-allot.conflist (the image's): keep one copy's contents")
	}
	var list struct {
		Plugins []struct {
			Type, AgentSocket, DelQueueDir, Timeout string
		}
	}
	if err := json.Unmarshal([]byte(data), &list); err != nil || len(list.Plugins) != 1 {
		t.Fatalf("conflist: %v, %d plugins", err, len(list.Plugins))
	}
	pl := list.Plugins[0]
	ds := r.daemonSets["allot-agent"]
	spec := ds.Spec.Template.Spec
	agent := container(t, spec.Containers, "agent")
	args := argFlags(t, agent.Args)
	if pl.AgentSocket != args["socket"] || pl.DelQueueDir != args["del-queue-dir"] {
		t.Errorf("conflist agentSocket %q delQueueDir %q; agent --socket %q --del-queue-dir %q",
			pl.AgentSocket, pl.DelQueueDir, args["socket"], args["del-queue-dir"])
	}
	// The agent's wait for addresses ends in time for its answer to beat
	// the plugin's ADD timeout, which ends in time for the runtime.
	timeout, err := time.ParseDuration(pl.Timeout)
	if err != nil {
		t.Fatalf("conflist timeout %q: %v (the agent's wait is checked against it: set it explicitly)", pl.Timeout, err)
	}
	if wait, err := time.ParseDuration(args["max-add-wait"]); err != nil || wait+plugin.AgentMargin > timeout {
		t.Errorf("agent --max-add-wait %q (%v) must end %v before the conflist's timeout %v", args["max-add-wait"], err, plugin.AgentMargin, timeout)
	}
	if w := plugin.TimeoutWarning(timeout); w != "" {
		t.Errorf("conflist timeout: %s", w)
	}
	// The plugin runs on the host: each path must be a hostPath mounted at
	// the same path in the agent, so both see one file.
	for _, p := range []string{pl.AgentSocket, pl.DelQueueDir, args["checkpoint"]} {
		if !onHostAtSamePath(spec, agent, p) {
			t.Errorf("%s is not on a hostPath mounted at the same path in the agent container", p)
		}
	}
	install := container(t, spec.InitContainers, "install-cni")
	iargs := argFlags(t, install.Args)
	if path.Base(iargs["plugin"]) != pl.Type {
		t.Errorf("init container installs %s, the conflist runs plugin type %q", iargs["plugin"], pl.Type)
	}
	for flag, host := range map[string]string{"bin-dir": "/opt/cni/bin", "conf-dir": "/etc/cni/net.d"} {
		if hp := hostPathAt(spec, install, iargs[flag]); hp != host {
			t.Errorf("init container --%s %s is hostPath %q, want %s", flag, iargs[flag], hp, host)
		}
	}
}

func TestAgentDaemonSet(t *testing.T) {
	r := render(t, "base")
	ds := r.daemonSets["allot-agent"]
	spec := ds.Spec.Template.Spec
	agent := container(t, spec.Containers, "agent")
	args := argFlags(t, agent.Args)
	wait, err := time.ParseDuration(args["max-add-wait"])
	if err != nil {
		t.Fatalf("--max-add-wait: %v (the grace period is checked against it: pass it explicitly)", err)
	}
	if spec.TerminationGracePeriodSeconds == nil || time.Duration(*spec.TerminationGracePeriodSeconds)*time.Second <= wait {
		t.Errorf("terminationGracePeriodSeconds %v must exceed --max-add-wait %v", spec.TerminationGracePeriodSeconds, wait)
	}
	if !spec.HostNetwork || spec.PriorityClassName != "system-node-critical" {
		t.Errorf("hostNetwork %v priorityClassName %q", spec.HostNetwork, spec.PriorityClassName)
	}
	if !slices.ContainsFunc(spec.Tolerations, func(t corev1.Toleration) bool {
		return t.Key == "" && t.Operator == corev1.TolerationOpExists && t.Effect == ""
	}) {
		t.Errorf("tolerations %v: want one that tolerates every taint", spec.Tolerations)
	}
	sc := agent.SecurityContext
	if sc == nil || (sc.Privileged != nil && *sc.Privileged) || sc.Capabilities == nil ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
		!slices.Equal(sc.Capabilities.Add, []corev1.Capability{"NET_ADMIN", "SYS_ADMIN"}) {
		t.Errorf("agent securityContext %+v: want not privileged, drop ALL, add exactly NET_ADMIN and SYS_ADMIN", sc)
	}
	_, port, _ := strings.Cut(args["introspect-addr"], ":")
	for name, p := range map[string]*corev1.Probe{"readiness": agent.ReadinessProbe, "liveness": agent.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port.String() != port ||
			p.HTTPGet.Host != "127.0.0.1" {
			t.Errorf("%s probe %+v: want GET 127.0.0.1:%s/healthz (--introspect-addr)", name, p, port)
		}
	}
	if args["node-name"] != "$(NODE_NAME)" || !envFromField(agent, "NODE_NAME", "spec.nodeName") {
		t.Errorf("--node-name %q: want $(NODE_NAME) from the downward API's spec.nodeName", args["node-name"])
	}
}

func TestBrokerStatefulSet(t *testing.T) {
	r := render(t, "base")
	ss := r.statefulSets["allot-broker"]
	if ss.Spec.Replicas == nil || *ss.Spec.Replicas != 3 {
		t.Fatalf("replicas %v, want 3", ss.Spec.Replicas)
	}
	if pdb := r.pdbs["allot-broker"]; pdb == nil || pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 2 {
		t.Errorf("PodDisruptionBudget: want minAvailable 2 of 3 (etcd quorum)")
	}
	if h := r.services[ss.Spec.ServiceName]; h == nil || h.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("governing Service %q: want a headless Service", ss.Spec.ServiceName)
	}
	if r.services["allot-broker"] == nil {
		t.Errorf("no allot-broker Service for agents and planners")
	}
	spec := ss.Spec.Template.Spec
	broker := container(t, spec.Containers, "broker")
	args := argFlags(t, broker.Args)
	// Every member of the initial cluster has its Service, whose cluster IP
	// Kubernetes puts in the environment the member's URL names.
	members := strings.Split(args["etcd-initial-cluster"], ",")
	if len(members) != 3 {
		t.Fatalf("--etcd-initial-cluster %q: want 3 members", args["etcd-initial-cluster"])
	}
	for i, m := range members {
		name, url, _ := strings.Cut(m, "=")
		if name != ss.Name+"-"+string(rune('0'+i)) || r.services[name] == nil {
			t.Errorf("member %q: want %s-%d with a Service of that name", m, ss.Name, i)
		}
		if !strings.HasPrefix(url, "https://") {
			t.Errorf("member %s's URL %q: want https (peer TLS)", name, url)
		}
		envName := strings.ToUpper(strings.ReplaceAll(name, "-", "_")) + "_SERVICE_HOST"
		if !strings.Contains(url, "$("+envName+")") {
			t.Errorf("member %s's URL %q does not use $(%s)", name, url, envName)
		}
	}
	// Readiness follows the broker's etcd quorum; liveness must not, or a
	// quorum loss restarts every member in a loop. Both on --metrics-addr,
	// the one listener up before etcd is.
	_, mport, _ := strings.Cut(args["metrics-addr"], ":")
	for name, c := range map[string]struct {
		p    *corev1.Probe
		path string
	}{"readiness": {broker.ReadinessProbe, "/readyz"}, "liveness": {broker.LivenessProbe, "/healthz"}} {
		p := c.p
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != c.path || containerPort(broker, p.HTTPGet.Port.String()) != mport {
			t.Errorf("broker %s probe %+v: want GET %s on the --metrics-addr port %s", name, p, c.path, mport)
		}
	}
	for _, f := range []string{"etcd-peer-cert", "etcd-peer-key", "etcd-peer-ca"} {
		if !mountedSecret(spec, broker, args[f]) {
			t.Errorf("--%s %q: want a file of a mounted Secret", f, args[f])
		}
	}
	if args["etcd-name"] != "$(POD_NAME)" || !envFromField(broker, "POD_NAME", "metadata.name") {
		t.Errorf("--etcd-name %q: want $(POD_NAME) from metadata.name", args["etcd-name"])
	}
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 {
		t.Errorf("broker pod securityContext %+v: want runAsNonRoot as 65532 (the image's user)", psc)
	}
	aa := spec.Affinity.PodAntiAffinity
	if aa == nil || len(aa.PreferredDuringSchedulingIgnoredDuringExecution) == 0 ||
		aa.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.TopologyKey != "topology.kubernetes.io/zone" {
		t.Errorf("broker anti-affinity %+v: want brokers spread across zones", aa)
	}
}

// mountedSecret reports whether path is a file in a Secret mounted in c.
func mountedSecret(spec corev1.PodSpec, c corev1.Container, path string) bool {
	for _, m := range c.VolumeMounts {
		if !strings.HasPrefix(path, m.MountPath+"/") {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.Secret != nil {
				return true
			}
		}
	}
	return false
}

// containerPort resolves a probe's port (a name or a number) to a number.
func containerPort(c corev1.Container, port string) string {
	for _, p := range c.Ports {
		if p.Name == port {
			return fmt.Sprint(p.ContainerPort)
		}
	}
	return port
}

func TestExternalEtcdOverlay(t *testing.T) {
	r := render(t, "overlays/external-etcd")
	ss := r.statefulSets["allot-broker"]
	args := argFlags(t, container(t, ss.Spec.Template.Spec.Containers, "broker").Args)
	if args["etcd-endpoints"] == "" || args["etcd-initial-cluster"] != "" || args["etcd-name"] != "" {
		t.Errorf("external etcd broker args %v: want --etcd-endpoints and no embedded member flags", args)
	}
	spec := ss.Spec.Template.Spec
	for _, v := range spec.Volumes {
		if !slices.ContainsFunc(spec.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == v.Name }) {
			t.Errorf("volume %s is mounted nowhere (a Secret this install has no need to create)", v.Name)
		}
	}
	if len(ss.Spec.VolumeClaimTemplates) != 0 {
		t.Errorf("external etcd brokers keep %d volume claims", len(ss.Spec.VolumeClaimTemplates))
	}
	for i := range 3 {
		if n := "allot-broker-" + string(rune('0'+i)); r.services[n] != nil {
			t.Errorf("external etcd overlay keeps the etcd member Service %s", n)
		}
	}
}

func TestImagesAreWhatMakeImagesBuilds(t *testing.T) {
	cmd := exec.Command("go", "run", "./deploy/images", "--list")
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("images --list: %v", err)
	}
	built := strings.Fields(string(out))
	version, err := os.ReadFile(filepath.Join(repoRoot, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range built {
		if !strings.HasSuffix(ref, ":"+strings.TrimSpace(string(version))) {
			t.Errorf("make images builds %s, not tagged with VERSION %s", ref, version)
		}
	}
	for _, dir := range kustomizations {
		r := render(t, dir)
		var cs []corev1.Container
		for _, d := range r.daemonSets {
			cs = append(cs, d.Spec.Template.Spec.InitContainers...)
			cs = append(cs, d.Spec.Template.Spec.Containers...)
		}
		for _, s := range r.statefulSets {
			cs = append(cs, s.Spec.Template.Spec.Containers...)
		}
		for _, c := range cs {
			if !slices.Contains(built, c.Image) {
				t.Errorf("%s: container %s runs %s; make images builds %v", dir, c.Name, c.Image, built)
			}
		}
	}
}
