package etcdembed

import (
	"fmt"
	"net"
	"net/url"
	"sort"
	"strings"
)

// Cluster states, as etcd's --initial-cluster-state takes them: "new"
// bootstraps a cluster whose members all start together; "existing" joins
// one that runs already (after `etcdctl member add`).
const (
	StateNew      = "new"
	StateExisting = "existing"
)

// Member is one entry of an initial cluster: a member name and the peer
// URL the other members reach it at.
type Member struct {
	Name    string
	PeerURL string
}

// ParseInitialCluster reads etcd's initial-cluster form,
// "name=http://host:port,name2=http://host2:port", and checks that every
// name appears once and every URL is an http(s) URL with a host and port.
func ParseInitialCluster(s string) ([]Member, error) {
	var out []Member
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, u, ok := strings.Cut(part, "=")
		if !ok || name == "" || u == "" {
			return nil, fmt.Errorf("initial cluster entry %q: want name=peer-url", part)
		}
		if seen[name] {
			return nil, fmt.Errorf("initial cluster: member %q appears twice", name)
		}
		seen[name] = true
		if _, err := parseURL(u); err != nil {
			return nil, fmt.Errorf("initial cluster member %q: %w", name, err)
		}
		out = append(out, Member{Name: name, PeerURL: u})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("initial cluster %q names no member", s)
	}
	return out, nil
}

// FormatInitialCluster is the inverse of ParseInitialCluster.
func FormatInitialCluster(ms []Member) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = m.Name + "=" + m.PeerURL
	}
	return strings.Join(parts, ",")
}

// PeerURLOf returns the peer URL the initial cluster gives member name, or
// "" if it has none.
func PeerURLOf(ms []Member, name string) string {
	for _, m := range ms {
		if m.Name == name {
			return m.PeerURL
		}
	}
	return ""
}

// Names lists the members' names, sorted.
func Names(ms []Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
	}
	sort.Strings(out)
	return out
}

// parseURL accepts http and https URLs with a host and a port.
func parseURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Port() == "" {
		return nil, fmt.Errorf("%q: want http://host:port", s)
	}
	if u.Path != "" && u.Path != "/" {
		return nil, fmt.Errorf("%q: a peer or client URL has no path", s)
	}
	return u, nil
}

// listenURL is where to bind for an advertised URL: the URL itself when its
// host is a loopback address (or localhost), else every address on its
// port. etcd binds only to addresses, and in a cluster the advertised host
// is often not one of the pod's: a pod's DNS name, or a Service's cluster IP
// that forwards to the pod.
func listenURL(adv *url.URL) *url.URL {
	host := adv.Hostname()
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return adv
	}
	l := *adv
	l.Host = net.JoinHostPort("0.0.0.0", adv.Port())
	return &l
}
