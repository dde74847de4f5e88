// Package e2e holds allot's end-to-end tests: the plugin binary executed by
// libcni with the deployed conflist, as a container runtime would, against
// allot-agent running as a process on a node network namespace, the broker
// in-process and awssim in place of EC2 and IMDS. Every check reads the
// kernel (netlink in the node and pod namespaces), the agent's checkpoint
// and introspection, the broker's records and awssim's state. The harness is
// in the harness package.
package e2e
