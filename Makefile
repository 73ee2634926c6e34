# The entry points a newcomer and CI use. `make test` runs every test tier
# this machine can run; `.ci/run` calls it.
CARGO ?= cargo
RELEASE_DIR := target/release
# Test peers from PyPI live in a project-local virtualenv.
VENV := .cache/venv
MOTO_VERSION := 5.2.5
export MOTO_SERVER := $(CURDIR)/$(VENV)/bin/moto_server

.PHONY: all build release demo test lint fmt bench clean tools

all: build

build:
	$(CARGO) build --workspace --locked

release:
	$(CARGO) build --workspace --release --locked

# The demo builds the `demo` profile (unoptimized, no debug info): minutes faster on a fresh machine.
demo:
	$(CARGO) build --profile demo --locked -p pv-topology-webhook -p cloud-credential-provider -p node-ip-helper
	@DEMO_BIN_DIR=target/demo bash scripts/demo.sh

# moto's server (AWS APIs and IMDS) for the tests that talk to AWS.
tools: $(VENV)/.moto-$(MOTO_VERSION)

$(VENV)/.moto-$(MOTO_VERSION):
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check 'moto[server]==$(MOTO_VERSION)'
	touch $@

# The cluster tier's real node installs the release archives and pulls the
# webhook's image (docs/testing.md, "The real node"): both are built first.
test: tools
	$(CARGO) test --workspace --exclude cluster-harness --locked --all-targets
	$(CARGO) test --workspace --exclude cluster-harness --locked --doc
	$(MAKE) --no-print-directory dist image
	bash tests/cluster/run.sh

lint: deny-tools
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings
	$(CARGO) deny --locked check licenses bans sources

# strace: node-ip-helper's crash test (tests/crash_write.rs) slows the syscalls of its writes
# with it, so that kills land between every two of them. systemd-analyze (Debian's systemd):
# node-ip-helper's tests/units.rs verifies the shipped units with it. openssl: the webhook's
# tests/serve_flags.rs makes PKCS#1 and SEC1 keys with it.
.PHONY: system-tools
tools: system-tools
system-tools:
	@command -v strace >/dev/null || { apt-get update -qq && apt-get install -y -qq strace; }
	@command -v systemd-analyze >/dev/null || { apt-get update -qq && apt-get install -y -qq systemd; }
	@command -v openssl >/dev/null || { apt-get update -qq && apt-get install -y -qq openssl; }

# The real node of the cluster tier (tests/cluster/harness/src/node.rs,
# docs/testing.md "The real node"): Debian's containerd 1.6 and runc, the CNI
# plugins (bridge, host-local, loopback), busybox-static (the local sandbox
# image), skopeo (pushes to the tier's registries) and htpasswd (apache2-utils,
# their bcrypt passwords). About 30 s from Debian's mirror.
NODE_PACKAGES := containerd runc containernetworking-plugins busybox-static skopeo apache2-utils
.PHONY: node-tools
tools: node-tools
node-tools:
	@missing=$$(for p in $(NODE_PACKAGES); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	  [ -z "$$missing" ] || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; }

# The dependency policy (deny.toml; docs/testing.md, "Dependency policy"):
# licences, banned and duplicate crates, crates.io only. `make lint` installs
# cargo-deny first (about 2 min 10 s to build); .ci/run lints before `make tools`.
DENY_VERSION := 0.20.2
.PHONY: deny-tools
tools: deny-tools
deny-tools:
	@$(CARGO) deny --version 2>/dev/null | grep -qx 'cargo-deny $(DENY_VERSION)' || $(CARGO) install --locked cargo-deny --version $(DENY_VERSION)

fmt:
	$(CARGO) fmt --all

# The load generator of the webhook benches (not needed by `make test`).
OHA_VERSION := 1.16.0
.PHONY: bench-tools bench-against
bench-tools:
	@oha --version 2>/dev/null | grep -qx 'oha $(OHA_VERSION)' || $(CARGO) install --locked oha --version $(OHA_VERSION)

bench: release bench-tools
	@bash bench/credential-provider.sh
	@bash bench/credential-provider-gcp.sh
	@bash bench/ecr.sh
	@bash bench/acr.sh
	@bash bench/webhook.sh
	@bash bench/webhook-vs-labeler.sh

# Today's binaries against BASE's (default the parent commit): docs/benchmarks.md,
# "Against an earlier revision".
bench-against: bench-tools tools
	@bash bench/against-revision.sh

# Flame graphs of the webhook under load (perf, root): docs/benchmarks.md, "Issue 18".
.PHONY: profile-webhook
profile-webhook:
	@bash bench/profile-webhook.sh

# Fuzzing (fuzz/, docs/testing.md "Fuzzing"): cargo-fuzz on the nightly
# toolchain. `make fuzz` runs every target 60 s with AddressSanitizer;
# `make fuzz-short` (CI) builds them without a sanitizer and runs each 3 s.
FUZZ_VERSION := 0.13.1
.PHONY: fuzz fuzz-short fuzz-tools
tools: fuzz-tools
fuzz-tools:
	@rustup toolchain list 2>/dev/null | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
	@$(CARGO) fuzz --version 2>/dev/null | grep -qx 'cargo-fuzz $(FUZZ_VERSION)' || $(CARGO) install --locked cargo-fuzz --version $(FUZZ_VERSION)
fuzz: fuzz-tools
	fuzz/run.sh 60
fuzz-short: fuzz-tools
	FUZZ_BUILD_ARGS="--sanitizer none" fuzz/run.sh 3

# The webhook under faults for SOAK_SECONDS (default 180): docs/benchmarks.md, "soak".
.PHONY: soak
soak: release tools
	@bash bench/soak.sh

clean:
	$(CARGO) clean

# The cluster tier's Go binaries (kube-apiserver, etcd, kubelet-side test
# programs), cached under .cache/cluster-bin/<k8s-version>/.
.PHONY: cluster-bin
cluster-bin:
	bash tests/cluster/build.sh

# The Helm chart (charts/pv-topology-webhook): helm lint --strict, helm
# template against the kustomize manifests (no drift), the values schema, and
# helm install/upgrade/uninstall into the cluster tier's kube-apiserver
# (tests/cluster/harness/tests/helm.rs; `make test` runs it with the tier).
# helm v3.22.0 is built from the Go module proxy by tests/cluster/build.sh
# into .cache/cluster-bin/ (`make helm`).
.PHONY: chart-test helm
helm:
	bash tests/cluster/build.sh helm

chart-test:
	bash tests/cluster/run.sh --test helm --test helm_validation --test chart_rules

# The webhook's OCI image (docs/webhook.md, "Image"): a static binary with its
# dependency list embedded (cargo auditable) on `FROM scratch`, built by
# buildah (vfs storage, chroot isolation) into
# target/image/pv-topology-webhook.tar (oci-archive), size and layers printed.
# `make image-test` runs that image (tests/image/run.sh) and pushes it to a real
# registry on 127.0.0.1 with `make push` (tests/image/push.sh).
.PHONY: image image-test image-tools
tools: image-tools
image-tools:
	@command -v buildah >/dev/null || { apt-get update -qq && apt-get install -y -qq buildah; }
	@command -v docker-registry >/dev/null || { apt-get update -qq && apt-get install -y -qq docker-registry; }

	@$(CARGO) auditable --version >/dev/null 2>&1 || $(CARGO) install --locked cargo-auditable

image: image-tools
	bash scripts/image.sh

image-test: image
	bash tests/image/run.sh
	bash tests/image/push.sh

# Push the image `make image` wrote to where the cluster pulls from (docs/webhook.md,
# "Image"): `make image push REGISTRY=ghcr.io/your-org` gives
# $(REGISTRY)/pv-topology-webhook:$(IMAGE_TAG), with buildah (vfs storage, as
# scripts/image.sh) and no other tool. Log in first (`buildah login REGISTRY`, or
# the registry's entry in ~/.docker/config.json); PUSH_FLAGS=--tls-verify=false
# for a registry on plain HTTP. Prints the pushed digest (the chart's image.digest).
IMAGE_ARCHIVE ?= target/image/pv-topology-webhook.tar
IMAGE_TAG ?= $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
.PHONY: push
push:
	@[ -n "$(REGISTRY)" ] || { echo 'push: set REGISTRY to where the cluster pulls from: make push REGISTRY=ghcr.io/your-org' >&2; exit 1; }
	@[ -s "$(IMAGE_ARCHIVE)" ] || { echo 'push: no $(IMAGE_ARCHIVE): run make image first' >&2; exit 1; }
	@command -v buildah >/dev/null || { echo 'push: buildah is missing (make tools)' >&2; exit 1; }
	@set -eu; b="buildah --storage-driver vfs"; digest=$$(mktemp); id=; \
	  trap '[ -z "$$id" ] || $$b rmi "$$id" >/dev/null 2>&1 || true; rm -f "$$digest"' EXIT; \
	  id=$$($$b pull --quiet "oci-archive:$(IMAGE_ARCHIVE)"); \
	  $$b push --quiet --digestfile "$$digest" $(PUSH_FLAGS) "$$id" "docker://$(REGISTRY)/pv-topology-webhook:$(IMAGE_TAG)"; \
	  echo "push: $(REGISTRY)/pv-topology-webhook:$(IMAGE_TAG) ($$(cat "$$digest"))"

# `make push` against a real registry on 127.0.0.1 (Debian's docker-registry):
# tests/image/push.sh.
.PHONY: push-test
push-test: image
	bash tests/image/push.sh

# Release archives (issue 13): target/dist/<program>-<version>-x86_64-linux.tar.gz
# for the three programs (node programs built `small`, the webhook `release`),
# a CycloneDX SBOM beside each (scripts/sbom.sh) and SHA256SUMS; see
# scripts/dist.sh and README.md, "Installing on a node image".
# `make dist-test` builds them and checks them: tests/dist/check.sh.
# `make tools` installs cargo-cyclonedx (about 156 s of CPU to build).
CYCLONEDX_VERSION := 0.5.9
.PHONY: dist dist-test dist-tools
tools: dist-tools
dist-tools:
	@$(CARGO) cyclonedx --version >/dev/null 2>&1 || $(CARGO) install --locked cargo-cyclonedx --version $(CYCLONEDX_VERSION)

# The last commit's time, read once: the archives' mtime, also for the check
# when a commit lands while they build.
DIST_EPOCH := $(shell git log -1 --format=%ct 2>/dev/null)
dist:
	SOURCE_DATE_EPOCH=$${SOURCE_DATE_EPOCH:-$(DIST_EPOCH)} bash scripts/dist.sh

dist-test: dist
	SOURCE_DATE_EPOCH=$${SOURCE_DATE_EPOCH:-$(DIST_EPOCH)} bash tests/dist/check.sh
