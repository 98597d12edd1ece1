# spanperf: the two commands a newcomer needs are `make demo` and `make test`.
SHELL := /bin/bash
export PATH := $(PATH):/usr/local/go/bin
GO      ?= go
BIN     := bin/spanperf
REV     := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X github.com/spanperf/spanperf/internal/version.Revision=$(REV)

.PHONY: all deps build demo test fuzz bench clean image test-kube
all: build

deps:
	@scripts/deps.sh

build: deps
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/spanperf

## demo: run examples/quick.yaml on a local two-site testbed and print the summary
demo: build
	$(BIN) run -f examples/quick.yaml

## test: every test, against real namespaces and links (needs root), then the
## Kubernetes tests against two real local clusters (test-kube, after the local
## ones: the clusters' daemons would be foreign CPU in the local known-answer tests).
## Packages run one at a time (-p 1): the known-answer tests (tbf rate,
## cgroup CPU, HTTP delay) measure time and must not share 2 cores with
## another package's datapaths. As another user it fails at once, saying
## why, rather than pass with the tests that need root skipped.
test:
	@if [ "$$(id -u)" != 0 ]; then echo "make test needs root: the tests create network namespaces, links and cgroups; run it as root (sudo make test)" >&2; exit 1; fi
	@$(MAKE) --no-print-directory build
	$(GO) vet ./...
	$(GO) test -count=1 -p 1 -timeout 15m ./...
	test/kube/smoke.sh

## image: the agent image, bin/spanperf.tar (a static spanperf at /spanperf;
## load it with `ctr -n k8s.io images import`); IMAGE_TAG names it.
IMAGE_TAG ?= spanperf.local/spanperf:dev
image: deps
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o bin/spanperf-static ./cmd/spanperf
	bin/spanperf-static image -o bin/spanperf.tar --tag $(IMAGE_TAG)

## test-kube: the Kubernetes part of `make test` alone (test/kube/smoke.sh, needs root):
## two real single-node clusters (binaries built once into /var/cache/spanperf/kube),
## the agent image as pods, rr and stream across the clusters' pod IPs, the Go tests
## that need clusters (testbed/kube, datapath/kubedp, runs end to end), teardown,
## and a check that nothing is left.
test-kube:
	@if [ "$$(id -u)" != 0 ]; then echo "make test-kube needs root: it runs two Kubernetes clusters (containerd, kubelet, network namespaces)" >&2; exit 1; fi
	test/kube/smoke.sh

## fuzz: a longer run of the scenario parser's fuzzer
fuzz: deps
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 60s ./internal/scenario/

## bench: built-in generators against iperf3, sockperf, wrk and h2load, side by side
bench: build
	@scripts/deps.sh bench
	bench/generators.sh
	bench/http.sh
	bench/wan.sh

clean:
	rm -rf bin
	-$(BIN) clean
