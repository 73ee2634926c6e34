#!/usr/bin/env bash
# Checks what `make dist` left in target/dist (run after it; `make dist-test`):
# - each archive holds exactly the expected entries, sorted, owner 0:0,
#   mtime SOURCE_DATE_EPOCH (the last commit's time), modes 0755/0644;
# - `sha256sum -c SHA256SUMS` passes and lists every archive and SBOM;
# - each SBOM is CycloneDX 1.5 JSON naming the binary's package and a known
#   dependency, every component with a purl;
# - each archived binary, extracted, runs `--version` and prints its version;
# - every archive path the README's node-image section names is in its archive,
#   and its install script installs the files (under a temporary root);
# - packing the same binaries again gives byte-identical archives and SBOMs.
set -euo pipefail
cd "$(dirname "$0")/../.."
DIST=${DIST_DIR:-target/dist}
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}
version=$(cargo metadata --locked --no-deps --format-version 1 |
  python3 -c 'import json,sys; print({p["name"]: p["version"] for p in json.load(sys.stdin)["packages"]}["pv-topology-webhook"])')
arch=$(rustc -vV | sed -n 's/^host: \([^-]*\)-.*/\1/p')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "dist check: $*" >&2; exit 1; }
passed=0

ccp_examples=$(cd manifests/credential-provider && ls *.yaml | sed 's#^#examples/#')
expected() {
  case $1 in
    cloud-credential-provider) printf '%s\n' LICENSE README.md cloud-credential-provider $ccp_examples ;;
    node-ip-helper) printf '%s\n' LICENSE README.md node-ip-helper default.env examples/kubeadm-join.yaml \
      systemd/20-node-ip-helper.conf systemd/node-ip-helper.service ;;
    pv-topology-webhook) printf '%s\n' LICENSE README.md pv-topology-webhook ;;
  esac
}
known_dep() {
  case $1 in
    cloud-credential-provider) echo serde_json ;;
    node-ip-helper) echo rtnetlink ;;
    pv-topology-webhook) echo kube-core ;;
  esac
}

# Where each node program's examples come from (scripts/dist.sh's pack lines).
examples_dir() {
  case $1 in
    cloud-credential-provider) echo manifests/credential-provider ;;
    node-ip-helper) echo manifests/node-ip-helper ;;
  esac
}

for program in cloud-credential-provider node-ip-helper pv-topology-webhook; do
  name="$program-$version-$arch-linux"
  archive="$DIST/$name.tar.gz"
  [ -f "$archive" ] || fail "$archive missing: run make dist"
  # Entries: exactly the expected files under one top directory, in sorted order.
  python3 - "$archive" "$name" "$SOURCE_DATE_EPOCH" "$program" <<'PY' > "$tmp/entries" || exit 1
import sys, tarfile
archive, top, epoch, program = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
with tarfile.open(archive) as t:
    members = t.getmembers()
names = [m.name for m in members]
if names != sorted(names):
    sys.exit(f"{archive}: entries not sorted: {names}")
for m in members:
    if (m.uid, m.gid, m.uname, m.gname) != (0, 0, "", ""):
        sys.exit(f"{archive}: {m.name} owned by {m.uid}:{m.gid} ({m.uname}:{m.gname}), not 0:0")
    if m.mtime != epoch:
        sys.exit(f"{archive}: {m.name} has mtime {m.mtime}, not SOURCE_DATE_EPOCH {epoch}")
    want = 0o755 if m.isdir() or m.name == f"{top}/{program}" else 0o644
    if m.mode != want:
        sys.exit(f"{archive}: {m.name} has mode {oct(m.mode)}, not {oct(want)}")
    if not (m.isdir() or m.isfile()):
        sys.exit(f"{archive}: {m.name} is neither a file nor a directory")
    if m.name != top and not m.name.startswith(top + "/"):
        sys.exit(f"{archive}: {m.name} outside {top}/")
    if m.isfile():
        print(m.name[len(top) + 1:])
PY
  sort "$tmp/entries" > "$tmp/got"
  expected "$program" | sort > "$tmp/want"
  diff -u "$tmp/want" "$tmp/got" > "$tmp/diff" || fail "$archive: files differ from the expected list:
$(cat "$tmp/diff")"
  passed=$((passed + 1))

  # The binary from the archive runs.
  mkdir "$tmp/$program"
  tar -xzf "$archive" -C "$tmp/$program"
  out=$("$tmp/$program/$name/$program" --version) || fail "$name/$program --version failed"
  [ "$out" = "$program $version" ] || fail "$name/$program --version printed '$out', not '$program $version'"
  # The examples in the archive are the repository's own.
  if [ "$program" != pv-topology-webhook ]; then
    for f in $(expected "$program" | grep -e / ); do
      src=$(examples_dir "$program")/${f##*/}
      cmp -s "$src" "$tmp/$program/$name/$f" || fail "$name/$f differs from $src"
    done
  fi
  grep -q "^# $program $version ($arch Linux)" "$tmp/$program/$name/README.md" || fail "$name/README.md: no title"
  grep -q "SPDX-License-Identifier: Apache-2.0" "$tmp/$program/$name/LICENSE" || fail "$name/LICENSE: no SPDX identifier"
  passed=$((passed + 1))

  # The SBOM.
  python3 - "$DIST/$name.cdx.json" "$program" "$version" "$(known_dep "$program")" <<'PY' || exit 1
import json, sys
path, program, version, dep = sys.argv[1:]
with open(path) as f:
    bom = json.load(f)
def need(cond, what):
    if not cond:
        sys.exit(f"{path}: {what}")
need(bom.get("bomFormat") == "CycloneDX", "bomFormat is not CycloneDX")
need(bom.get("specVersion") == "1.5", f"specVersion {bom.get('specVersion')}, not 1.5")
top = bom["metadata"]["component"]
need((top["name"], top["version"]) == (program, version), f"metadata.component is {top['name']} {top['version']}")
need(top["purl"].startswith(f"pkg:cargo/{program}@{version}"), f"metadata.component purl {top['purl']}")
names = {c["name"]: c for c in bom["components"]}
need(dep in names, f"no component {dep}")
need(names[dep]["purl"].startswith(f"pkg:cargo/{dep}@"), f"{dep}'s purl {names[dep]['purl']}")
need(names[dep].get("licenses"), f"{dep} has no licence")
need(all(c.get("purl") for c in bom["components"]), "a component without purl")
refs = {c["bom-ref"] for c in bom["components"]} | {top["bom-ref"]}
for d in bom["dependencies"]:
    need(d["ref"] in refs and set(d.get("dependsOn", [])) <= refs, f"dependency {d['ref']} names an unknown component")
need(any(d["ref"] == top["bom-ref"] and d.get("dependsOn") for d in bom["dependencies"]), "the binary's own dependencies missing")
PY
  passed=$((passed + 1))
done

# Checksums: every archive and SBOM listed, and all match.
(cd "$DIST" && sha256sum --quiet -c SHA256SUMS) || fail "sha256sum -c SHA256SUMS failed"
listed=$(awk '{print $2}' "$DIST/SHA256SUMS" | sort)
present=$(cd "$DIST" && ls *.tar.gz *.cdx.json | sort)
[ "$listed" = "$present" ] || fail "SHA256SUMS lists '$listed', target/dist holds '$present'"
passed=$((passed + 1))

# The README's node-image section names only files the archives hold.
section=$(sed -n '/^## Installing on a node image/,/^## /p' README.md)
[ -n "$section" ] || fail "README.md: no section '## Installing on a node image'"
for program in cloud-credential-provider node-ip-helper; do
  # Paths into an extracted archive: PROGRAM-${VERSION}-x86_64-linux/PATH,
  # or PROGRAM/PATH for one extracted with --strip-components=1.
  n=0
  for path in $(grep -oE "(^|[[:space:]\"':=])$program(-\\\$\{VERSION\}-x86_64-linux)?/[A-Za-z0-9._/-]+" <<<"$section" |
      sed -E "s/^[^a-z]//" | sort -u); do
    rel=${path#*/}
    [ -e "$tmp/$program/$program-$version-$arch-linux/$rel" ] ||
      fail "README.md names $path, which the $program archive does not hold"
    n=$((n + 1))
  done
  [ "$n" -gt 2 ] || fail "README.md's node-image section names only $n files of the $program archive"
done
passed=$((passed + 1))

# The README's install script, run on the archives with every absolute path
# under a temporary root (and without systemctl), installs the files where
# the units and the examples expect them.
root="$tmp/root"
mkdir -p "$root" "$tmp/work"
awk '/^# install-node-programs.sh/{f=1} f&&/^```/{exit} f' README.md |
  sed -e "s# /usr/# $root/usr/#g; s# /etc/# $root/etc/#g; s#^/usr/#$root/usr/#; s#^systemctl .*#:#" > "$tmp/install.sh"
grep -q 'install -D' "$tmp/install.sh" || fail "README.md: no install-node-programs.sh script"
cp "$DIST"/*.tar.gz "$DIST/SHA256SUMS" "$tmp/work/"
# Its CONFIG, written as the README says: the archive's example, taken out
# with tar (ecr.yaml is valid as shipped).
ccp="cloud-credential-provider-$version-$arch-linux"
tar -xzOf "$tmp/work/$ccp.tar.gz" "$ccp/examples/ecr.yaml" > "$tmp/work/credential-providers.yaml"
# A config check-config refuses stops the script before anything of it is in /etc.
sed 's/^kind: CredentialProviderConfig$/kind: CredentialProviderConfg/' "$tmp/work/credential-providers.yaml" > "$tmp/work/refused.yaml"
if (cd "$tmp/work" && VERSION=$version CONFIG="$tmp/work/refused.yaml" sh -eu "$tmp/install.sh" > "$tmp/install.log" 2>&1); then
  fail "README.md's install script installed a config check-config refuses"
fi
grep -q "CredentialProviderConfg" "$tmp/install.log" || fail "README.md's install script: check-config did not name the refused kind: $(cat "$tmp/install.log")"
[ ! -e "$root/etc/kubernetes/credential-providers.yaml" ] || fail "README.md's install script installed the refused config"
(cd "$tmp/work" && VERSION=$version CONFIG="$tmp/work/credential-providers.yaml" sh -eu "$tmp/install.sh" > "$tmp/install.log" 2>&1) ||
  fail "README.md's install script failed: $(cat "$tmp/install.log")"
cmp -s "$tmp/work/credential-providers.yaml" "$root/etc/kubernetes/credential-providers.yaml" ||
  fail "README.md's install script installed another config than CONFIG"
for f in usr/local/lib/kubelet/credential-providers/cloud-credential-provider usr/local/bin/node-ip-helper \
    etc/kubernetes/credential-providers.yaml etc/systemd/system/node-ip-helper.service \
    etc/systemd/system/kubelet.service.d/20-node-ip-helper.conf etc/default/node-ip-helper; do
  [ -f "$root/$f" ] || fail "README.md's install script did not install /$f"
done
grep -q '^ExecStart=/usr/local/bin/node-ip-helper ' "$root/etc/systemd/system/node-ip-helper.service" ||
  fail "node-ip-helper.service does not run /usr/local/bin/node-ip-helper"
"$root/usr/local/lib/kubelet/credential-providers/cloud-credential-provider" --version > /dev/null
passed=$((passed + 1))

# Reproducible: packing the same binaries again gives the same bytes.
DIST_SKIP_BUILD=1 DIST_DIR="$tmp/again" bash scripts/dist.sh > /dev/null
cmp -s "$DIST/SHA256SUMS" "$tmp/again/SHA256SUMS" || fail "a second packing differs:
$(diff "$DIST/SHA256SUMS" "$tmp/again/SHA256SUMS")"
passed=$((passed + 1))

echo "dist: $passed passed, 0 failed"
