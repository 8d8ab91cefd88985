# raftset: `make test` is the README's test command; `make image` builds the
# FROM-scratch Docker image around a static binary built on this host;
# `make compose-test` runs the 3-node docker compose cluster test.
GO    ?= go
IMAGE ?= raftset:local
BIN   := bin/raftset

export PATH := /usr/local/go/bin:$(PATH)

.PHONY: all build static test image compose-test jepsen jepsen-smoke clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/raftset

test:
	$(GO) test -race ./...

# Static, so it runs in an image with nothing else in it.
static:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $(BIN) ./cmd/raftset

image: static
	docker build -t $(IMAGE) .

compose-test:
	.ci/compose-test.sh

# The Jepsen-style suite (docs/jepsen.md): every scenario, or the CI tier.
jepsen:
	$(GO) test -tags jepsen -count=1 -timeout 30m -v ./integration/

jepsen-smoke:
	$(GO) test -tags jepsen -count=1 -timeout 15m ./integration/ -run '^(TestJepsenSmoke|TestChecker.*|TestScheduleFromSeed)$$'

clean:
	rm -rf bin
