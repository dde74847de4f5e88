package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/allotnet/allot/broker/etcdembed"
)

// embeddedEtcd is how this replica's embedded etcd member joins the others:
// empty fields give a member alone, the one-machine default.
type embeddedEtcd struct {
	name           string
	peerURL        string
	clientURL      string
	initialCluster string
	clusterState   string
	// peerCert, peerKey and peerCA turn mutual TLS on between members.
	peerCert, peerKey, peerCA string
}

// peerTLS is the members' peer TLS, nil when off.
func (e embeddedEtcd) peerTLS() *etcdembed.PeerTLS {
	if e.peerCert == "" {
		return nil
	}
	return &etcdembed.PeerTLS{CertFile: e.peerCert, KeyFile: e.peerKey, CAFile: e.peerCA}
}

// clustered reports whether the member is one of several.
func (e embeddedEtcd) clustered() bool { return e.initialCluster != "" }

func (e *embeddedEtcd) flags(fs *flag.FlagSet) {
	fs.StringVar(&e.name, "etcd-name", "", "embedded etcd member name (default: --name); must be this member's name in --etcd-initial-cluster")
	fs.StringVar(&e.peerURL, "etcd-peer-url", "", "embedded etcd peer URL other members reach this one at (default: this member's URL in --etcd-initial-cluster, else 127.0.0.1 on a free port); a host other than a loopback address (a pod's DNS name, a Service IP) is bound as 0.0.0.0 on the same port")
	fs.StringVar(&e.clientURL, "etcd-client-url", "", "embedded etcd client URL (default: 127.0.0.1 on a free port); the broker dials it, and so does etcdctl for backups")
	fs.StringVar(&e.initialCluster, "etcd-initial-cluster", "", "every embedded etcd member, name=peer-url,... (e.g. the StatefulSet's broker-0..2); empty runs a member alone. Read only while --data-dir is empty")
	fs.StringVar(&e.peerCert, "etcd-peer-cert", "", "certificate this member presents to its peers, for both directions (server and client auth), "+
		"naming the host of its peer URL; with it every peer URL is https and members accept only peers whose certificate --etcd-peer-ca signed")
	fs.StringVar(&e.peerKey, "etcd-peer-key", "", "key of --etcd-peer-cert")
	fs.StringVar(&e.peerCA, "etcd-peer-ca", "", "CA bundle the members' peer certificates must chain to")
	fs.StringVar(&e.clusterState, "etcd-initial-cluster-state", etcdembed.StateNew, "new: the members bootstrap together; existing: join a running cluster after `etcdctl member add`")
}

// validate checks the embedded etcd's flags against the rest of c, so a
// mistake stops the broker before it starts a member that can never reach
// its peers.
func (e *embeddedEtcd) validate(c config) error {
	if e.name == "" {
		e.name = c.name
	}
	tlsSet := e.peerCert != "" || e.peerKey != "" || e.peerCA != ""
	set := e.peerURL != "" || e.clientURL != "" || e.initialCluster != "" || e.clusterState != etcdembed.StateNew || tlsSet
	if len(c.etcdEndpoints) > 0 {
		if set {
			return errors.New("--etcd-peer-url, --etcd-client-url, --etcd-peer-cert/key/ca and --etcd-initial-cluster(-state) are for the embedded etcd; drop them or --etcd-endpoints")
		}
		return nil
	}
	if tlsSet && (e.peerCert == "" || e.peerKey == "" || e.peerCA == "") {
		return errors.New("--etcd-peer-cert, --etcd-peer-key and --etcd-peer-ca go together")
	}
	if e.clusterState != etcdembed.StateNew && e.clusterState != etcdembed.StateExisting {
		return fmt.Errorf("--etcd-initial-cluster-state %q: want %q or %q", e.clusterState, etcdembed.StateNew, etcdembed.StateExisting)
	}
	if !e.clustered() {
		if e.clusterState == etcdembed.StateExisting {
			return errors.New("--etcd-initial-cluster-state=existing needs --etcd-initial-cluster")
		}
		return nil
	}
	ms, err := etcdembed.ParseInitialCluster(e.initialCluster)
	if err != nil {
		return fmt.Errorf("--etcd-initial-cluster: %w", err)
	}
	scheme := map[bool]string{true: "https", false: "http"}[tlsSet]
	for _, m := range ms {
		if !strings.HasPrefix(m.PeerURL, scheme+"://") {
			return fmt.Errorf("--etcd-initial-cluster: member %q's URL %s: want %s:// (peer TLS %s)", m.Name, m.PeerURL, scheme,
				map[bool]string{true: "on: --etcd-peer-cert is set", false: "off: no --etcd-peer-cert"}[tlsSet])
		}
	}
	own := etcdembed.PeerURLOf(ms, e.name)
	switch {
	case own == "":
		return fmt.Errorf("--etcd-initial-cluster has no member %q (this replica's --etcd-name); it lists %v", e.name, etcdembed.Names(ms))
	case e.peerURL != "" && e.peerURL != own:
		return fmt.Errorf("--etcd-peer-url %s differs from %s, member %q's URL in --etcd-initial-cluster", e.peerURL, own, e.name)
	case len(ms) == 2:
		return errors.New("--etcd-initial-cluster: two members survive no failure (both are needed for a quorum); use three or five")
	}
	return nil
}
