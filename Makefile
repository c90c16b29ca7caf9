# vnetlab: `make demo` runs the default experiment, `make test` runs every test.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

.PHONY: build deps demo test test-locked fuzz test-kernels conformance bench-up bench-paths bench-kube bench-harness bench-stats bench-policies bench-kube-policies bench-latency-load bench-converge clean-labs generate

# Static, without cgo: no package needs C, and then no thread of vnetlab's
# carries glibc's rseq area, which the kernel updates at every context switch
# back into the thread (the rr engine's tcp_rr: ~0.2 us per transaction a
# side, 2% of its rate; docs/engines.md).
build:
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o bin/vnetlab ./cmd/vnetlab

deps:
	./scripts/install-deps.sh

# Builds, installs what is missing, runs seed 002's podIP row and prints its table:
# rounds until every comparison with veth-routed is within ±2% (paired by round),
# or 6 minutes of rounds have passed (docs/statistics.md).
demo: deps build
	./bin/vnetlab doctor
	./bin/vnetlab run --precision 2% --duration 2s --max-time 6m
	@echo "Next: a real 2-node Kubernetes in namespaces, measured the same way (the first kube up builds Kubernetes and CoreDNS: ~12 min):"
	@echo "  sudo ./bin/vnetlab kube up --name k && sudo ./bin/vnetlab kube run --cluster k --tests tcp_stream,tcp_rr,tcp_crr"

# Every test, for real: namespaces, iperf3 traffic, eBPF programs. Needs root.
# -p 1: packages run one at a time, as tests build labs and measure.
# CGO_ENABLED=0 as `build`: the tests run the code as it ships, and the
# standard library is compiled once, not again with cgo.
# The root namespace is snapshotted before and checked after the whole suite,
# so the suite needs the machine to itself: it takes TEST_LOCK, the lock every
# other vnetlab test, lab or cluster run on this machine takes too
# (docs/labs.md, "Leaving the machine clean"); a second `make test` waits instead of seeing the
# first one's namespaces come and go as changes.
TEST_LOCK ?= /run/vnetlab-dev.lock
test: deps build
	@flock -n $(TEST_LOCK) true || echo "make test: waiting for $(TEST_LOCK): another vnetlab run on this machine holds it"
	flock -w 3600 $(TEST_LOCK) $(MAKE) --no-print-directory test-locked

# Every Go fuzz target (func FuzzXxx in a package's fuzz_test.go, beside the parser of
# outside input it fuzzes) in turn, FUZZTIME each: per target its exec count, and for an
# input that fails, where Go kept it (the package's testdata/fuzz/, a regression case from
# then on) and the one command that runs it again (scripts/fuzz.sh; docs/labs.md, "Fuzzing
# the inputs"). No root, no namespaces. `make test` runs each for TEST_FUZZTIME.
FUZZTIME ?= 10m
TEST_FUZZTIME ?= 2s
fuzz:
	FUZZTIME=$(FUZZTIME) GO=$(GO) CGO_ENABLED=0 ./scripts/fuzz.sh

# Tests left out of the suite to keep it under an hour (each says how to run it):
# the netpol smoke subset of upstream's specs (docs/conformance.md; SUITE=netpol-smoke).
TEST_SKIP ?= ^TestNetpolSmoke$$
# The suite itself, for a caller that already holds TEST_LOCK; then every fuzz target for
# TEST_FUZZTIME (go test has run their seed corpora already; about a minute in all). The
# fuzzing binaries (instrumented: minutes of building on an empty cache) are built at the
# lowest priority while the suite runs, so the fuzzing after it costs only its own time.
# So are the pinned Kubernetes, CoreDNS, peer, e2e and Cilium builds (`vnetlab kube build --all`,
# in the order the suite first needs them): on a fresh machine the first cluster test finds them
# built, or waits for the one under way, instead of starting each build when it gets there.
# On 2 cores the tests leave little CPU idle, so it mostly moves work: a cold suite took
# a minute less with it (docs/measurements/2026-11-29-cold-suite-and-cilium-build.md). A failed build ahead of
# time fails nothing: its log is printed, and the test that needs it builds it again.
# Labs and clusters an earlier run left (no vnetlab process uses them) are
# removed first, as `vnetlab clean` does, so the snapshot is the machine's own.
# The packages run in two parts. First every package but KUBE_PKGS and GUEST_PKGS, one
# at a time. Then the packages that run local clusters (KUBE_PKGS: one cluster at a time,
# as kubelet's sysctls are the machine's), and beside them, at the lowest priority, the
# stock-kernel guests (GUEST_PKGS: qemu with no network, nothing on the host but its own
# processes). A cluster leaves much of the CPU idle, and the guests take that
# (docs/measurements/2026-11-30-suite-guests-beside-clusters.md).
KUBE_PKGS = ./internal/kube/cluster ./internal/kube/conformance ./internal/kube/proxy
GUEST_PKGS = ./e2e/kernels
# The guests' go test limit (its own `make test-kernels` too): the two guests took 16 minutes
# beside the clusters; this leaves room for a boot run again after an emulator crash.
GUEST_TIMEOUT = 70m
# Last of the cluster tests, the Cilium smoke: a Cilium cluster with kube-proxy and one with
# Cilium's kube-proxy replacement, each with pods across nodes, a Service and one
# NetworkPolicy (TestCilium*, which a plain go test skips without VNETLAB_CILIUM=1). Cilium's
# build, last of those ahead of time, has had the longest by then.
CILIUM_SMOKE = -run '^TestCilium' ./internal/kube/cluster
# At the end the suite prints where the machine's CPU went: each part's wall time and
# CPU, and the machine's busy, idle and stolen CPU over the run (scripts/suite-cpu.sh), with the
# time and CPU of each build made ahead of time (none when all were cached). A cold suite
# keeps both cores busy, half of it building (docs/measurements/2026-12-01-cold-suite-cpu.md).
CPU = ./scripts/suite-cpu.sh
test-locked:
	./bin/vnetlab clean
	before=$$(mktemp /tmp/vnetlab-rootns-XXXXXX.json) && $(GO) run ./tools/rootns save $$before && \
	fuzzbin=$$(mktemp -d /tmp/vnetlab-fuzzbin-XXXXXX) && cpu=$$fuzzbin/cpu && $(CPU) $$cpu start && \
	{ GO=$(GO) CGO_ENABLED=0 $(CPU) $$cpu run fuzz-build nice -n 19 ./scripts/fuzz.sh --build $$fuzzbin >$$fuzzbin/build.log 2>&1 & fuzzbuild=$$!; \
	  $(CPU) $$cpu run kube-build nice -n 19 ./bin/vnetlab kube build --all >$$fuzzbin/kube-build.log 2>&1 & kubebuild=$$!; \
	  apart=$$($(GO) list $(KUBE_PKGS) $(GUEST_PKGS)) && labpkgs=$$($(GO) list ./... | grep -v -x -F "$$apart") || exit 1; \
	  CGO_ENABLED=0 VNETLAB_BIN=$(CURDIR)/bin/vnetlab $(CPU) $$cpu run lab-packages $(GO) test -p 1 -count=1 -timeout 60m -skip '$(TEST_SKIP)' $$labpkgs; code=$$?; \
	  CGO_ENABLED=0 VNETLAB_BIN=$(CURDIR)/bin/vnetlab $(CPU) $$cpu run guests nice -n 19 $(GO) test -count=1 -timeout $(GUEST_TIMEOUT) $(GUEST_PKGS) >$$fuzzbin/guests.log 2>&1 & guests=$$!; \
	  CGO_ENABLED=0 VNETLAB_BIN=$(CURDIR)/bin/vnetlab $(CPU) $$cpu run cluster-packages $(GO) test -p 1 -count=1 -timeout 60m -skip '$(TEST_SKIP)' $(KUBE_PKGS) || code=1; \
	  CGO_ENABLED=0 VNETLAB_CILIUM=1 VNETLAB_BIN=$(CURDIR)/bin/vnetlab $(CPU) $$cpu run cilium-smoke $(GO) test -count=1 -timeout 30m $(CILIUM_SMOKE) || code=1; \
	  wait $$guests || code=1; cat $$fuzzbin/guests.log; \
	  wait $$fuzzbuild || { cat $$fuzzbin/build.log; code=1; }; \
	  wait $$kubebuild || { echo "vnetlab kube build, ahead of the tests, failed (the tests built what they needed):"; cat $$fuzzbin/kube-build.log; }; \
	  grep -h ' of CPU)' $$fuzzbin/kube-build.log; \
	  FUZZBIN=$$fuzzbin FUZZTIME=$(TEST_FUZZTIME) GO=$(GO) CGO_ENABLED=0 $(CPU) $$cpu run fuzzing ./scripts/fuzz.sh || code=1; \
	  $(CPU) $$cpu report; rm -rf $$fuzzbin; \
	  $(GO) run ./tools/rootns check $$before || code=1; rm -f $$before; exit $$code; }

# vnetlab on Debian 12's stock 6.12 and 6.1 kernels under qemu (software
# emulation: correctness only): the modes this machine's kernel lacks (ipvlan,
# the Open vSwitch kernel datapath, netkit), each guest test reported as a subtest.
# The kernel package is cached in ~/.cache/vnetlab/kernels. Needs root.
test-kernels: deps build
	VNETLAB_BIN=$(CURDIR)/bin/vnetlab $(GO) test -count=1 -v -timeout $(GUEST_TIMEOUT) $(GUEST_PKGS)

# Upstream Kubernetes e2e specs on a fresh 3-node local cluster (docs/conformance.md):
# by default the [sig-network] Services suite against vnetlab's CNI (veth-ebpf) and
# eBPF proxy; PROXY=iptables is the stock kube-proxy baseline. Variables (each passed
# only when set): SUITE (services, granular-services, conntrack, network, smoke, dual, dual-smoke, netpol),
# PROXY (vnetlab-ebpf, vnetlab-sock, iptables, nftables, cilium), NETWORK_POLICY (vnetlab, kube-router, cilium, none),
# SOCKET_LB=1, CNI, CNI_MODE, FAMILY (ipv4, ipv6, dual), NODES, ZONES, PROCS, FOCUS, SKIP, REPORT_DIR,
# NAME (the cluster's). Needs root; the first run builds e2e.test (~10 min). Exits 1 when a spec fails.
conformance: deps build
	./bin/vnetlab kube conformance $(strip $(CONFORMANCE_FLAGS))

CONFORMANCE_FLAGS = $(if $(SUITE),--suite '$(SUITE)') $(if $(PROXY),--proxy '$(PROXY)') $(if $(SOCKET_LB),--socket-lb) $(if $(NETWORK_POLICY),--network-policy '$(NETWORK_POLICY)') \
	$(if $(CNI),--cni '$(CNI)') $(if $(CNI_MODE),--cni-mode '$(CNI_MODE)') $(if $(FAMILY),--ip-family '$(FAMILY)') $(if $(NODES),--nodes '$(NODES)') $(if $(ZONES),--zones '$(ZONES)') \
	$(if $(PROCS),--procs '$(PROCS)') $(if $(FOCUS),--focus '$(FOCUS)') $(if $(SKIP),--skip '$(SKIP)') \
	$(if $(REPORT_DIR),--report-dir '$(REPORT_DIR)') $(if $(NAME),--name '$(NAME)')

# Benchmark: 200-pod bridge lab up and down (the target: up in 10 s or less).
bench-up: build
	./scripts/bench-up.sh

# Benchmark: the eBPF data-path table (eBPF paths against macvlan, loopback and their pod
# IP), one interleaved run, each row a ratio with its 95% CI and target.
bench-paths: build
	./scripts/bench-paths.sh

# How sure each comparison method is on this machine (docs/statistics.md):
# A/A false positives, coverage of known ratios and the time to ±2%, for
# unpaired, paired and duet comparisons, from long interleaved runs cut into
# short ones; under the lab lock (~45 min). BENCH_STATS_ARGS: its flags
# (go run ./tools/bench-stats -h), e.g. "-reuse -dir DIR" to analyse again.
bench-stats: build
	flock $(TEST_LOCK) env CGO_ENABLED=0 VNETLAB_BIN=$(CURDIR)/bin/vnetlab $(GO) run ./tools/bench-stats $(BENCH_STATS_ARGS)

# The harness-cost table: what the harness costs, `vnetlab run` against the standalone
# engine per mode and test (target >= 0.99), then the engine against the C
# references and netperf when it is on PATH; under the lab lock (~10 min).
bench-harness: build
	flock $(TEST_LOCK) env VNETLAB_BIN=$(CURDIR)/bin/vnetlab ./scripts/bench-harness.sh

# The lab NetworkPolicy cost table: tcp_crr and tcp_rr at 0/100/1000/10000 NetworkPolicies
# per mode and policy provider, ratios to 0 with CIs, from one interleaved run;
# then apply latency per provider at 0, 1000 and 10000 (CELLS=0: apply latency alone, ~10 min);
# under the lab lock (~35 min).
bench-policies: build
	flock $(TEST_LOCK) env VNETLAB_BIN=$(CURDIR)/bin/vnetlab ./scripts/bench-policies.sh

# The cluster NetworkPolicy cost table: tcp_crr and tcp_rr at 0/100/1000 NetworkPolicies on a
# cluster per enforcer (vnetlab eBPF, vnetlab nftables, kube-router), each beside a
# one-node lab of its shape, profiled (the enforcer's CPU); then each enforcer's apply latency
# (kube converge --policy) at 0, 1000 and 10000, with the controllers' CPU and memory
# (CELLS=0: apply latency alone, ~10 min); under the lab lock (~40 min).
bench-kube-policies: build
	flock $(TEST_LOCK) env VNETLAB_BIN=$(CURDIR)/bin/vnetlab ./scripts/bench-kube-policies.sh

# The latency-under-load numbers: tcp_crr latency against offered load (10-95% of
# each path's closed-loop maximum) over five modes, with CIs, the report's
# curves and knees, then the stall test's p99s; under the lab lock (~10 min).
bench-latency-load: build
	flock $(TEST_LOCK) env VNETLAB_BIN=$(CURDIR)/bin/vnetlab ./scripts/bench-latency-load.sh

# The local-cluster table: kube-proxy iptables/nftables vs vnetlab's proxies on local
# clusters, one run of scenarios/kube-proxies.yaml (needs root, ~30 min).
bench-kube: build
	./scripts/bench-kube.sh

# The network programming latency table and chart: network programming latency per proxy against N other
# Services (kube converge on local clusters, N kept between steps; each step takes the
# lab lock itself). All proxies, N up to 100k, E 1 and 10: many hours; see the script's
# header for a shorter run (PROXIES, NS, ES, CHANGES).
bench-converge: build
	VNETLAB_BIN=$(CURDIR)/bin/vnetlab ./scripts/bench-converge.sh

clean-labs: build
	./bin/vnetlab clean

# Recompiles bpf/*.c into the committed internal/datapath/tcbpf/service_bpfel.{go,o},
# internal/datapath/sock/sock_bpfel.{go,o}, internal/datapath/polbpf/policy_bpfel.{go,o} and internal/measure/profile/profile_bpfel.{go,o}
# (needs clang 14 and libbpf-dev: apt-get install clang-14 libbpf-dev; building
# vnetlab itself does not). The objects are byte-identical when regenerated unchanged.
BPF2GO_CC    ?= clang-14
BPF2GO_STRIP ?= llvm-strip-14
generate:
	BPF2GO_CC=$(BPF2GO_CC) BPF2GO_STRIP=$(BPF2GO_STRIP) $(GO) generate ./internal/datapath/tcbpf ./internal/datapath/sock ./internal/datapath/polbpf ./internal/measure/profile ./internal/measure/pktstat
