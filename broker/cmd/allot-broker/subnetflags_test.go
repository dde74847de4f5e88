package main

import (
	"bytes"
	"reflect"
	"testing"
)

func TestPodSubnetFlags(t *testing.T) {
	c, err := parseFlags([]string{"--" + insecureFlag, "--pod-subnet-ids", "subnet-1, subnet-2",
		"--pod-subnet-vpc-ids", "vpc-1", "--pod-subnet-tags", "kubernetes.io/role/cni,allot.dev/pods=yes"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	s := c.podSubnets
	if !reflect.DeepEqual(s.IDs, []string{"subnet-1", "subnet-2"}) || !reflect.DeepEqual(s.VPCIDs, []string{"vpc-1"}) ||
		!reflect.DeepEqual(s.Tags, map[string]string{"kubernetes.io/role/cni": "", "allot.dev/pods": "yes"}) {
		t.Errorf("selector %+v", s)
	}
	if c, err := parseFlags([]string{"--" + insecureFlag}, &bytes.Buffer{}); err != nil || !c.podSubnets.Empty() {
		t.Errorf("no flags: %+v, %v; want an empty selection", c.podSubnets, err)
	}
	if _, err := parseFlags([]string{"--" + insecureFlag, "--pod-subnet-tags", "=x"}, &bytes.Buffer{}); err == nil {
		t.Error("a tag without a key was accepted")
	}
}
