// Package auth decides who may ask the broker for what. Agents prove the
// EC2 instance they run on with the instance identity document IMDS signs
// and a key of their own (Attester, AuthService), and get a short-lived
// node token; planners and operators present client certificates whose
// allot:// URI SAN names their role. The Authorizer's interceptors hold
// every call to one table of methods and roles (policy.go) before any
// handler runs, and a node to its own instance. docs/security.md explains
// the design and the threat model.
package auth
