# Sourced by the exec benchmarks: static_small_build builds
# cloud-credential-provider with the `small` profile linked statically (glibc,
# +crt-static; --target keeps RUSTFLAGS off build scripts and proc macros and
# the build in target/<triple>/small) and prints the binary's path. A
# measurement aid: the archives ship the dynamic build (README, "Node programs").
static_small_build() {
  local triple
  triple=$(rustc -vV | sed -n 's/^host: //p')
  RUSTFLAGS="-C target-feature=+crt-static" \
    cargo build --profile small --locked --target "$triple" -p cloud-credential-provider >&2
  echo "$PWD/target/$triple/small/cloud-credential-provider"
}
