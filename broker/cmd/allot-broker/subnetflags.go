package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/allotnet/allot/broker/subnets"
)

// subnetFlags are the flags that select the pod subnets the broker
// records at start (broker/subnets), before any node registers.
type subnetFlags struct {
	ids, vpcs, tags *string
}

func (f *subnetFlags) register(fs *flag.FlagSet) {
	f.ids = fs.String("pod-subnet-ids", "", "comma-separated subnets the broker records and budgets from start")
	f.vpcs = fs.String("pod-subnet-vpc-ids", "", "comma-separated VPCs whose subnets the broker records from start "+
		"(narrowed by --pod-subnet-tags when set)")
	f.tags = fs.String("pod-subnet-tags", "", "comma-separated key or key=value tags selecting pod subnets, "+
		"e.g. kubernetes.io/role/cni (in --pod-subnet-vpc-ids when set, else in any VPC)")
}

// selector builds the selection; a malformed tag is an error.
func (f *subnetFlags) selector() (subnets.Selector, error) {
	s := subnets.Selector{IDs: splitComma(*f.ids), VPCIDs: splitComma(*f.vpcs)}
	for _, t := range splitComma(*f.tags) {
		k, v, _ := strings.Cut(t, "=")
		if k = strings.TrimSpace(k); k == "" {
			return s, fmt.Errorf("--pod-subnet-tags %q: a tag needs a key", *f.tags)
		}
		if s.Tags == nil {
			s.Tags = map[string]string{}
		}
		s.Tags[k] = strings.TrimSpace(v)
	}
	return s, nil
}
