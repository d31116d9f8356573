# Reckon's everyday commands. `make run` and `make test` are the two a newcomer needs.

TOOL := go tool -modfile=tools/go.mod
SQLC := $(TOOL) sqlc

.PHONY: run test test-clients test-upgrade test-citus generate lint check-rules build bench bench-ci fuzz

## run: migrate the database of DATABASE_URL (default: local Postgres, database "reckon", created
## if missing) and run server and reactor until Ctrl-C.
run:
	scripts/run

## test: the whole suite with the race detector. Databases come from TEST_DATABASE_URL, else a
## Postgres container (testcontainers), else (no Docker engine, or one that cannot pull the image)
## the local Postgres, said loudly. Without a database the database tests fail, never pass silently.
test:
	scripts/test

## test-clients: the Python and TypeScript clients' suites (clients/), against this checkout's
## server and reactor on TEST_DATABASE_URL's Postgres or the local one; `make test` runs them last.
test-clients:
	scripts/test-clients

## test-upgrade: the online upgrade test — binaries of earlier commits under load (a reactor
## SIGKILLed every few seconds) while this commit's `server migrate up` runs, then reactors and
## servers rolled; nothing lost, repeated or rewritten, no 5xx, no job left running. A few minutes;
## databases on the local Postgres (scripts/test-upgrade).
test-upgrade:
	scripts/test-upgrade

## test-citus: Reckon on a Citus cluster (docs/deploy.md): the planning check, reactors SIGKILLed and
## a worker restarted on a Citus cell, the Python client's suite on a cell. Needs RECKON_CITUS_URL
## and RECKON_CITUS_WORKERS: eval "$$(../shared/ci/citus-env)" (scripts/test-citus).
test-citus:
	scripts/test-citus

## fuzz: every fuzz target (the input decoders and validators) for FUZZTIME each (default 15s).
fuzz:
	scripts/fuzz

## generate: regenerate internal/dbsqlc from db/migrations and db/queries.
generate:
	$(SQLC) generate

## lint: gofmt, go vet, staticcheck, deadcode (nothing unreachable, tests counted as users), a
## check that the generated code is current, and check-rules. The linters are pinned in tools/go.mod.
lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	go vet ./...
	$(TOOL) staticcheck ./...
	@out=$$($(TOOL) deadcode -test ./...) && test -z "$$out" || { echo "deadcode: unreachable code:"; echo "$$out"; exit 1; }
	$(SQLC) generate
	@git diff --exit-code -- internal/dbsqlc || { echo "internal/dbsqlc is stale: run make generate and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- internal/dbsqlc)" || { echo "internal/dbsqlc has files git does not know:"; git status --porcelain -- internal/dbsqlc; exit 1; }
	@$(MAKE) --no-print-directory check-rules

## check-rules: the Prometheus alert rules of deploy/prometheus, checked and unit-tested with promtool
## (Debian's prometheus package). Without promtool it says so and passes, except under CI=true.
check-rules:
	@if ! command -v promtool >/dev/null 2>&1; then \
	  if [ "$$CI" = true ]; then echo "promtool is missing (Debian's prometheus package): the alert rules cannot be checked" >&2; exit 1; fi; \
	  echo "promtool is missing (Debian's prometheus package): alert rules NOT checked (under CI=true this fails)"; exit 0; \
	fi; \
	promtool check rules deploy/prometheus/alerts.yml && promtool test rules deploy/prometheus/alerts_test.yml

build:
	go build -o bin/ ./cmd/...

## bench: the full benchmark against a fresh database on DATABASE_URL's server (default: the local
## Postgres); prints the table and writes bench.json. Takes a few minutes. Then the cost of
## tracing: the enqueue and dispatch scenarios off and on (an in-memory exporter), in one run, with
## their ratio (bench-tracing.json). Then the cost of the event stream: enqueue, dispatch and
## latency without events written and with, in one run, with their ratio (bench-events.json).
bench:
	go run ./cmd/bench -n 50000 -w 100 -c 16 -duration 10s -storage-n 10000 -retention-backlog 100000 -json bench.json
	go run ./cmd/bench -scenarios enqueue,reckon -n 50000 -w 100 -c 16 -duration 10s -tracing both -json bench-tracing.json
	go run ./cmd/bench -scenarios enqueue,reckon,latency -n 50000 -w 100 -c 16 -duration 10s -events both -json bench-events.json

## bench-ci: a small run so that the benchmark cannot rot (CI).
bench-ci:
	go run ./cmd/bench -n 2000 -w 50 -c 8 -duration 1s -memory-n 3000 -storage-n 100 -retention-backlog 5000 -json /tmp/reckon-bench-ci.json
	go run ./cmd/bench -scenarios enqueue,reckon -n 2000 -w 50 -c 8 -duration 1s -tracing both -json /tmp/reckon-bench-ci-tracing.json
	go run ./cmd/bench -scenarios reckon -n 2000 -w 50 -c 8 -duration 1s -events both -json /tmp/reckon-bench-ci-events.json
