// Package cluster runs allot on one machine, for `make demo` and the
// end-to-end tests: awssim standing in for EC2 and IMDS, its data plane
// mirroring the VPC in network namespaces (a namespace per node, a VPC
// router, an outside host), allot-broker with its embedded etcd, one
// allot-agent per node, and the runtime's side of CNI — libcni executing
// the allot plugin binary with the deployed conflist — creating pods in
// namespaces of their own.
//
// The broker and the agents are child processes, so tests can kill and
// restart them. Each agent runs in the root namespace, where awssim's
// per-instance IMDS and the broker listen on loopback, and configures its
// node's namespace through netlink handles bound to it (allot-agent
// --node-netns). Every namespace is named after the run
// (<stem><6 hex digits>-…), the run's state lives in a directory of the
// same name under the system temporary directory, and a lock file there
// marks the run alive: Start first removes what crashed runs of the same
// stem left, and Close removes everything of its own run.
//
// What the package reports is measured, never derived from its
// configuration: addresses from the runtime's ADD results, ENIs and
// addresses from awssim's state, EC2 calls from awssim's admin counters,
// budgets from `allotctl budgets`, and connectivity from TCP connections
// opened inside pod namespaces.
package cluster
