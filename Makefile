# raftset: `make test` is the README's test command; `make image` builds the
# FROM-scratch Docker image around a static binary built on this host;
# `make compose-test` runs the 3-node docker compose cluster test; `make certs`
# writes a CA and node certificates n1..n3 for a local TLS cluster into
# certs/ (never committed); `make lint` is what every change must pass
# besides the tests.
GO    ?= go
IMAGE ?= raftset:local
BIN   := bin/raftset
# raftset --version reports it (go's own VCS stamp misses git worktrees).
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)

export PATH := /usr/local/go/bin:$(PATH)

.PHONY: all build static test lint image compose-test compose-shards-test certs jepsen jepsen-ci jepsen-smoke clean

all: build

build:
	$(GO) build -ldflags='-X main.commit=$(COMMIT)' -o $(BIN) ./cmd/raftset

test:
	$(GO) test -race -timeout 20m ./...

# gofmt, go vet (the Jepsen files too) and the layering tests: package
# directions and the state machine's clock and randomness ban.
lint:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags jepsen ./...
	$(GO) test -count=1 ./internal/layering

# Static, so it runs in an image with nothing else in it.
static:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w -X main.commit=$(COMMIT)' -o $(BIN) ./cmd/raftset

image: static
	docker build -t $(IMAGE) .

compose-test:
	.ci/compose-test.sh

# The 6-node, 2-shard compose cluster (docker-compose.shards.yml) from the host.
compose-shards-test:
	.ci/compose-shards-test.sh

# The compose file makes its own in a volume (the certs service); these are
# for nodes run from the shell (README, "A secure cluster"). Re-running keeps
# what is valid. NODES="a b" names other nodes.
NODES ?= n1 n2 n3
certs: build
	$(BIN) cert init --dir certs $(NODES)

# The Jepsen-style suite (docs/jepsen.md): the whole scenario matrix (procs,
# netns and docker backends; root, iptables, iproute2 and docker needed), the
# CI tier (the matrix rows marked CI, 40 s each, plus the checker tests), or
# the old loopback smoke test. One row: go test -tags jepsen ./integration/
# -run '^TestJepsen$$/^partition-majority-5$$' -v
JEPSEN_UNIT := TestChecker.*|TestScheduleFromSeed|TestShardOf|TestPartitionShapes|TestLeaderTermsChecker|TestMatrixShape|TestRecheckSavedHistory
# The TTL (clock offset) and SPOP-queue workloads under kill/pause.
JEPSEN_WORKLOADS := TestJepsenQueue|TestJepsenTTL

jepsen:
	$(GO) test -tags jepsen -count=1 -timeout 60m -v ./integration/

jepsen-ci:
	JEPSEN_TIER=ci CI=$${CI:-1} $(GO) test -tags jepsen -count=1 -timeout 30m -v ./integration/ -run '^(TestJepsen|$(JEPSEN_WORKLOADS)|$(JEPSEN_UNIT))$$'

jepsen-smoke:
	$(GO) test -tags jepsen -count=1 -timeout 15m ./integration/ -run '^(TestJepsenSmoke|$(JEPSEN_UNIT))$$'

clean:
	rm -rf bin
