# allot — build, test and generate. Every tool is pinned and installed with
# `go install` into .tools/, so nothing is downloaded as a prebuilt binary.

GO          ?= go
BIN         := bin
TOOLS       := $(CURDIR)/.tools
BUF_VERSION := v1.75.0
PROTOC_GEN_GO_VERSION := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
STATICCHECK_VERSION := v0.8.2

# VERSION is the release every binary, image and manifest carries; COMMIT
# and DATE come from git (the commit's own date, so a rebuild of the same
# commit is byte-identical). Outside a git checkout they read "unknown".
VERSION     := $(shell cat VERSION)
COMMIT      := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
DATE        := $(shell git log -1 --format=%cI 2>/dev/null || echo unknown)
BUILDINFO   := github.com/allotnet/allot/internal/buildinfo
LDFLAGS     := -X $(BUILDINFO).version=$(VERSION) -X $(BUILDINFO).commit=$(COMMIT) -X $(BUILDINFO).date=$(DATE)

# Every main package in the repository, built into bin/ under its own name.
COMMANDS := $(shell $(GO) list -f '{{if eq .Name "main"}}{{.ImportPath}}{{end}}' ./... 2>/dev/null)

.PHONY: all build images test fuzz proto lint tools clean demo soak bench-cni bench-burst bench-burst-quick bench-sweep bench-scale bench-updown bench-agents

all: build

# build makes static binaries (CGO_ENABLED=0), as the images hold them: the
# demo, soak and benchmarks run what a cluster runs.
build:
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ $(COMMANDS)

# images builds the agent and broker images with no container engine
# (deploy/images): static binaries for IMAGE_ARCH on an empty base, into an
# OCI layout and one tarball per image under out/images/.
IMAGE_ARCH  ?= $(shell $(GO) env GOARCH)
IMAGES_DIR  := out/images
IMAGE_BINS  := ./agent/cmd/allot-agent ./cni/cmd/allot ./cni/cmd/allot-install-cni ./broker/cmd/allot-broker ./broker/cmd/allotctl
images:
	@mkdir -p $(IMAGES_DIR)/bin
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(IMAGES_DIR)/bin/ $(IMAGE_BINS)
	$(GO) run ./deploy/images --bin-dir $(IMAGES_DIR)/bin --out $(IMAGES_DIR) --tag $(VERSION) \
		--commit $(COMMIT) --date $(DATE) --arch $(IMAGE_ARCH)

# test is the command README and CI run. Tests that need network namespaces
# skip with a reason when not run as root.
test: build
	$(GO) test -count=1 -timeout 40m ./...
	$(MAKE) fuzz

# fuzz runs each fuzz target briefly; the seed corpus already runs in `test`.
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeRequest$$' -fuzztime 15s ./awssim/ec2query/

# demo runs a one-machine cluster on a simulated VPC (as root): nodes join,
# pods get addresses through the CNI plugin, packets flow, and everything is
# cleaned up. DEMO_FLAGS="--nodes 5 --pods-per-node 40" for more.
DEMO_FLAGS ?=
demo: build
	$(BIN)/demo $(DEMO_FLAGS)

# soak runs the one-machine cluster (three broker replicas) under a
# kubelet-like driver and a fault schedule (agent kill -9, broker leader
# kill -9 and SIGSTOP, etcd member kill, node termination, EC2 errors,
# latency, eventual consistency and drained buckets) and checks allot's
# invariants throughout and at the end (as root; docs/reliability.md).
# SOAK_DURATION=30m for a long run.
SOAK_DURATION ?= 5m
SOAK_FLAGS ?=
soak: build
	$(BIN)/soak --duration $(SOAK_DURATION) $(SOAK_FLAGS)

# bench-burst measures a scale-up burst: 500 c5.xlarge nodes running the real
# agent code (kernel replaced by a recorder), 46 pods each, against the real
# broker and awssim with EC2's throttling at a time scale; with secondary IPs
# and /28 prefixes, with both planner policies at 100% and 50% of the
# buckets and the naive planner (the ablation) at 100%, with the pods arriving all at once, on a 100 pods/s ramp and with
# a fifth of the nodes joining during the burst; next to the aws-vpc-cni ipamd model and the Cilium
# operator model, each at its defaults and tuned. Each variant's row and
# JSON line are printed as it finishes. docs/benchmarks.md has the method,
# the results and how long it takes.
BURST_PROFILES ?= all,ramp=100,join=0.2
bench-burst: build
	$(BIN)/allot-burst --profiles $(BURST_PROFILES) --plan-policies time-optimal,fewest-calls
# bench-burst-quick is the CI size: 40 nodes against an account with a fifth
# of EC2's buckets, so every ratio is defined (a few minutes).
bench-burst-quick: build
	$(BIN)/allot-burst --quick --plan-policies time-optimal,fewest-calls
# bench-sweep is the curve and the repetitions (hours; see
# docs/benchmarks.md): 100/250/500/1000 nodes with 3 seeds each, then the
# ratio at time scales 5, 2 and 1 at 100 and 250 nodes. Each ends with a
# min/median/max summary; each variant's row is written to $(SWEEP_DIR) as it
# finishes (progress on stderr).
SWEEP_DIR ?= bench-sweep-out
SWEEP_FLAGS ?= --shares 1 --ipamd-tuned= --cilium-tuned=
bench-sweep: build
	@mkdir -p $(SWEEP_DIR)
	$(BIN)/allot-burst $(SWEEP_FLAGS) --node-counts 100,250,500,1000 --seeds 1,2,3 > $(SWEEP_DIR)/sizes.txt
	$(BIN)/allot-burst $(SWEEP_FLAGS) --node-counts 100,250 --time-scales 5,2,1 --seeds 1,2,3 > $(SWEEP_DIR)/time-scales.txt

# bench-updown is the way back down and up again: the 500-node burst, every
# pod deleted, the pools back at their warm targets (excess released after
# each agent's acknowledgement), then the burst again; calls against their
# minimum, the time back at warm, in-use addresses freed (must be 0) and
# the second burst against its floor (docs/benchmarks.md). About 5 minutes.
UPDOWN_FLAGS ?= --nodes 500 --pods-per-node 46
bench-updown: build
	$(BIN)/allot-scale --updown $(UPDOWN_FLAGS)

# bench-scale asks what a cluster ten times the burst's size costs the
# broker: 5,000 c5.xlarge nodes running the real agent code, 30 pods each
# (150,000), against the real broker (a process of its own, etcd fsynced)
# and awssim. It prints the burst table, the plan round p99, the broker's
# peak RSS, the idle fleet's etcd writes and the burst ratio against their
# targets, and a JSON line (docs/benchmarks.md). SCALE_FLAGS="--nodes 500"
# for a development size.
SCALE_FLAGS ?=
bench-scale: build
	$(BIN)/allot-scale $(SCALE_FLAGS)

# bench-agents runs real allot-agent processes, each with its node's
# namespace and real host networking, against the broker and awssim with
# TLS and node attestation on (as `make demo` does): per-agent memory
# (VmRSS idle, VmHWM overall) and CPU idle and over a burst of 110 pods per
# node, the rate at which one node replaces its pods through the plugin,
# and the pool alone with its checkpoint on disk, with group commit and
# with every change written alone (as root; docs/benchmarks.md).
AGENTS_FLAGS ?=
bench-agents: build
	$(BIN)/allot-agents $(AGENTS_FLAGS)

# bench-cni measures ADD/DEL latency through the plugin binary in real
# network namespaces next to the reference ptp + host-local plugins (which
# the benchmark installs with go install). Run as root.
bench-cni:
	$(GO) test -count=1 -run '^$$' -bench '^BenchmarkCNILatency$$' -benchtime 1x -timeout 20m ./bench/cni/ -args -pods 100

$(TOOLS)/buf:
	GOBIN=$(TOOLS) $(GO) install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
$(TOOLS)/protoc-gen-go:
	GOBIN=$(TOOLS) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
$(TOOLS)/protoc-gen-go-grpc:
	GOBIN=$(TOOLS) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
$(TOOLS)/staticcheck:
	GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

tools: $(TOOLS)/buf $(TOOLS)/protoc-gen-go $(TOOLS)/protoc-gen-go-grpc $(TOOLS)/staticcheck

# proto regenerates proto/allot/v1/*.pb.go; the output is committed.
proto: $(TOOLS)/buf $(TOOLS)/protoc-gen-go $(TOOLS)/protoc-gen-go-grpc
	$(TOOLS)/buf lint
	$(TOOLS)/buf generate

lint: $(TOOLS)/staticcheck
	$(GO) vet ./...
	$(TOOLS)/staticcheck ./...

clean:
	rm -rf $(BIN) out
