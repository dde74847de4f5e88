package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/allotnet/allot/broker/auth/devca"
)

// startRealEtcd runs the etcd server binary (Debian's etcd-server, which
// .ci/run installs) on loopback with TLS on its client port and client
// certificates required, and returns its client URL and the CA that signs
// its and its clients' certificates, with the CA's file and a directory for
// more.
func startRealEtcd(t *testing.T) (endpoint string, ca *devca.CA, caPath, dir string) {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		t.Skip("no etcd server binary on PATH (apt-get install etcd-server): external etcd over TLS not tested")
	}
	ca, err = devca.New("external etcd test CA")
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	leaf, err := ca.Server("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := leaf.Write(dir, "etcd")
	if err != nil {
		t.Fatal(err)
	}
	caPath, err = ca.WriteCert(dir, "ca")
	if err != nil {
		t.Fatal(err)
	}
	client, peer := "https://"+freePort(t), "http://"+freePort(t)
	cmd := exec.Command(bin, "--name", "ext", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "ext="+peer,
		"--cert-file", cert, "--key-file", key, "--client-cert-auth", "--trusted-ca-file", caPath)
	logf, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("etcd log:\n%s", b)
		}
	})
	return client, ca, caPath, dir
}

// TestExternalEtcdOverTLS: the broker keeps its state in a real etcd that
// demands TLS client certificates, with --etcd-cacert, --etcd-cert and
// --etcd-key; without a client certificate it stops at start and says why.
func TestExternalEtcdOverTLS(t *testing.T) {
	endpoint, ca, caPath, dir := startRealEtcd(t)
	clientLeaf, err := ca.Client("allot-broker")
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := clientLeaf.Write(dir, "client")
	if err != nil {
		t.Fatal(err)
	}
	sim := emptySim(t)
	sec := newSecure(t, sim)
	args := append([]string{"--name", "ext-a", "--cluster", "ext", "--ec2-endpoint", sim.EC2Endpoint(),
		"--etcd-endpoints", endpoint, "--etcd-cacert", caPath, "--etcd-cert", cert, "--etcd-key", key}, sec.args(t)...)
	p := startBroker(t, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	eventually(t, "the broker leads on the external etcd", func() error {
		l, err := leaderOf(ctx, sec.admin(t, p))
		if err == nil && l != "ext-a" {
			err = fmt.Errorf("leader %q", l)
		}
		return err
	})

	// The state is in that etcd: read it with our own TLS client.
	pair, err := clientLeaf.TLS()
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second,
		TLS: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: ca.Pool(), Certificates: []tls.Certificate{pair}}})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	eventually(t, "the broker's keys in the external etcd", func() error {
		resp, err := cli.Get(ctx, "/allot/v1/ext/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err == nil && len(resp.Kvs) == 0 {
			err = fmt.Errorf("no keys under /allot/v1/ext/")
		}
		return err
	})
	if !strings.Contains(p.logText(), `msg="using external etcd"`) {
		t.Errorf("log does not say it uses the external etcd:\n%s", p.logText())
	}

	// Without a client certificate etcd refuses the broker, which stops.
	bad := append([]string{"--name", "ext-b", "--cluster", "ext", "--ec2-endpoint", sim.EC2Endpoint(),
		"--etcd-endpoints", endpoint, "--etcd-cacert", caPath}, sec.args(t)...)
	out, err := exec.Command(brokerBin, bad...).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("broker without a client certificate: %v, want exit 1\n%s", err, out)
	}
	if !strings.Contains(string(out), "does not answer") || !strings.Contains(string(out), "--etcd-cert") {
		t.Errorf("the refusal does not say what to check:\n%s", out)
	}
}
