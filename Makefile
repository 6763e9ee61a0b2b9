# Kubebuilder-style entry points. Every target runs through hack/node-env.sh, which installs
# Node.js 24 when the machine's node is older and keeps node_modules in step with the lockfile.
SHELL := bash
NODE_ENV := bash hack/node-env.sh

.PHONY: sandbox soak run test test-unit lint format build bench control-plane helm manifests image clean help

help: ## Show the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

sandbox: ## The whole system locally: control plane, GitHub double, paddock, a RunnerDeployment (--kind runnerset: a RunnerSet) and simulated jobs (ARGS="--duration 60 --json")
	@$(NODE_ENV) node bin/paddock.js sandbox $(ARGS)

soak: ## The chaos soak: faults of every kind while invariants are checked; one JSON line, exit 1 on a violation (ARGS="--runners 200 --duration 30m --seed N")
	@$(NODE_ENV) node bin/paddock.js sandbox --soak --json $(if $(ARGS),$(ARGS),--runners 200 --duration 30m)

run: ## paddock run against the test control plane and the GitHub double, no simulated jobs (development)
	@$(NODE_ENV) node bin/paddock.js sandbox --no-simulator --runners 0 $(ARGS)

test: ## Build (or reuse) the test control plane, then run every unit and integration test
	@$(NODE_ENV) node test/run.ts $(ARGS)

test-unit: ## Unit tests only (no control plane needed)
	@$(NODE_ENV) node test/run.ts --unit $(ARGS)

lint: ## Biome lint + format check and the TypeScript type check
	@$(NODE_ENV) npm run --silent lint

format: ## Format the sources with Biome
	@$(NODE_ENV) npm run --silent format

build: ## Bundle to dist/ (esbuild; the type check is make lint)
	@$(NODE_ENV) npm run --silent build

bench: ## Benchmarks: JSON lines, then the README's table of figures against targets (ARGS="--only fleet --profile")
	@$(NODE_ENV) node bench/all.ts $(ARGS)

control-plane: ## Build kube-apiserver, kube-controller-manager and etcd into the cache (once)
	@bash hack/build-control-plane.sh

helm: ## Build the pinned Helm v4 (chart tests, make manifests) into the cache (once)
	@bash hack/build-helm.sh

manifests: ## Regenerate the CRDs (config/crd, charts/paddock/crds, their types) and config/default from the chart
	@$(NODE_ENV) node hack/gen-crds.ts
	@$(NODE_ENV) node hack/gen-manifests.ts

image: ## Build the container image as an OCI archive, out/paddock-<version>.oci.tar (ARGS="--json", "--update-lock")
	@$(NODE_ENV) node hack/build-image.ts $(ARGS)

clean: ## Remove build output (not the binary caches)
	rm -rf dist out
