# The entry points a newcomer and CI use. `make test` runs every test tier
# this machine can run; `.ci/run` calls it.
CARGO ?= cargo
RELEASE_DIR := target/release

.PHONY: all build release demo test lint fmt bench clean

all: build

build:
	$(CARGO) build --workspace --locked

release:
	$(CARGO) build --workspace --release --locked

demo:
	$(CARGO) build --release --locked -p cloud-credential-provider -p node-ip-helper
	@bash scripts/demo.sh

test:
	$(CARGO) test --workspace --locked --all-targets
	$(CARGO) test --workspace --locked --doc

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

fmt:
	$(CARGO) fmt --all

bench: release
	@bash bench/credential-provider.sh

clean:
	$(CARGO) clean
