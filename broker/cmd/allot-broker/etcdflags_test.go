package main

import (
	"io"
	"strings"
	"testing"
)

func TestEmbeddedEtcdFlags(t *testing.T) {
	const three = "broker-0=http://broker-0.peers:2380,broker-1=http://broker-1.peers:2380,broker-2=http://broker-2.peers:2380"
	// The insecure flag only lets these parse without TLS files; TLS is not
	// what they are about.
	const plain = "--" + insecureFlag
	c, err := parseFlags([]string{"--name=broker-1", "--etcd-initial-cluster=" + three, "--etcd-client-url=http://127.0.0.1:2379", plain}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.etcd.name != "broker-1" || !c.etcd.clustered() || c.etcd.clusterState != "new" {
		t.Fatalf("embedded etcd config %+v: want member broker-1 of a new cluster", c.etcd)
	}
	c, err = parseFlags([]string{"--name=x", "--etcd-name=broker-2", "--etcd-initial-cluster=" + three,
		"--etcd-peer-url=http://broker-2.peers:2380", "--etcd-initial-cluster-state=existing", plain}, io.Discard)
	if err != nil || c.etcd.name != "broker-2" || c.etcd.clusterState != "existing" {
		t.Fatalf("explicit member: %+v, %v", c.etcd, err)
	}
	if c, err = parseFlags([]string{"--name=solo", plain}, io.Discard); err != nil || c.etcd.clustered() || c.etcd.name != "solo" {
		t.Fatalf("default: %+v, %v; want a member alone named after the replica", c.etcd, err)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--name=broker-9", "--etcd-initial-cluster=" + three}, `no member "broker-9"`},
		{[]string{"--name=broker-0", "--etcd-initial-cluster=" + three, "--etcd-peer-url=http://10.0.0.1:2380"}, "differs from"},
		{[]string{"--name=a", "--etcd-initial-cluster=a=http://h:1,b=http://h:2"}, "two members survive no failure"},
		{[]string{"--name=a", "--etcd-initial-cluster=a=ftp://h:1"}, "want http://host:port"},
		{[]string{"--name=a", "--etcd-initial-cluster-state=joined"}, `--etcd-initial-cluster-state "joined"`},
		{[]string{"--name=a", "--etcd-initial-cluster-state=existing"}, "needs --etcd-initial-cluster"},
		{[]string{"--name=a", "--etcd-endpoints=https://e:2379", "--etcd-initial-cluster=a=http://h:1"}, "are for the embedded etcd"},
		{[]string{"--name=a", "--etcd-endpoints=https://e:2379", "--etcd-peer-url=http://h:1"}, "are for the embedded etcd"},
		{[]string{"--name=a", "--etcd-endpoints=https://e:2379", "--etcd-peer-cert=c"}, "are for the embedded etcd"},
		{[]string{"--name=broker-0", "--etcd-initial-cluster=" + three, "--etcd-peer-cert=c"}, "go together"},
		{[]string{"--name=broker-0", "--etcd-initial-cluster=" + three, "--etcd-peer-cert=c", "--etcd-peer-key=k", "--etcd-peer-ca=ca"}, "want https://"},
		{[]string{"--name=broker-0", "--etcd-initial-cluster=" + strings.ReplaceAll(three, "http:", "https:")}, "want http://"},
	} {
		_, err := parseFlags(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}
