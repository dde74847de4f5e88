package etcdembed

import (
	"context"
	"crypto/tls"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/auth/devca"
)

// TestPeerTLS: three members whose peers speak mutual TLS form one
// cluster; the peer port refuses a caller without a certificate from the
// peers' CA, and plain http.
func TestPeerTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dir := t.TempDir()
	ca, err := devca.New("allot etcd peers")
	if err != nil {
		t.Fatal(err)
	}
	caFile, err := ca.WriteCert(dir, "ca")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Peer("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := leaf.Write(dir, "peer")
	if err != nil {
		t.Fatal(err)
	}
	cfgs := testCluster(t, 3)
	var ms []Member
	for _, m := range mustParse(t, cfgs[0].InitialCluster) {
		ms = append(ms, Member{Name: m.Name, PeerURL: strings.Replace(m.PeerURL, "http://", "https://", 1)})
	}
	for i := range cfgs {
		cfgs[i].InitialCluster = FormatInitialCluster(ms)
		cfgs[i].PeerTLS = &PeerTLS{CertFile: cert, KeyFile: key, CAFile: caFile}
	}
	srvs := startAll(t, ctx, cfgs)
	cli, err := srvs[0].Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	cli2, err := srvs[2].Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli2.Close()
	if r, err := cli2.Get(ctx, "k"); err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "v" {
		t.Fatalf("read through another member: %v, %v", r, err)
	}

	// Without a client certificate the peer port refuses the handshake;
	// plain http gets no answer.
	peer := ms[1].PeerURL
	noCert := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	if resp, err := noCert.Get(peer + "/members"); err == nil {
		_ = resp.Body.Close()
		t.Fatalf("peer port answered %s to a caller without a certificate", resp.Status)
	}
	plain := &http.Client{Timeout: 3 * time.Second}
	if resp, err := plain.Get(strings.Replace(peer, "https://", "http://", 1) + "/members"); err == nil && resp.StatusCode == http.StatusOK {
		_ = resp.Body.Close()
		t.Fatal("peer port answered plain http")
	}
	withCert := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: ca.Pool(), Certificates: []tls.Certificate{mustTLS(t, leaf)}}}}
	resp, err := withCert.Get(peer + "/members")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("peer port with the peers' certificate: %v, %v", resp, err)
	}
	_ = resp.Body.Close()
}

func mustParse(t *testing.T, s string) []Member {
	t.Helper()
	ms, err := ParseInitialCluster(s)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func mustTLS(t *testing.T, l devca.Leaf) tls.Certificate {
	t.Helper()
	c, err := l.TLS()
	if err != nil {
		t.Fatal(err)
	}
	return c
}
