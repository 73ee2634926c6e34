#!/usr/bin/env bash
# The image tier: runs the BUILT IMAGE (target/image/pv-topology-webhook.tar,
# from `make image`), not the host's binary, under buildah with chroot
# isolation (it shares the host's network namespace, so the host reaches the
# webhook on loopback and the webhook reaches the test's fake on loopback):
#   - `certs` inside the image writes the serving certificate into a mounted
#     directory; `serve` reads it from there (read-only mount);
#   - a review over TLS answers, with an EBS lookup whose EC2 endpoint is given
#     by a host name (ec2.image-test.internal, from the container's /etc/hosts,
#     and localhost): name resolution inside a scratch image;
#   - that endpoint is HTTPS signed by a test CA, trusted as users give theirs:
#     SSL_CERT_FILE naming a mounted file, or a bundle mounted over the
#     image's /etc/ssl/certs/ca-certificates.crt; without either, the image's
#     own roots refuse it;
#   - /readyz and /metrics answer; SIGTERM ends `serve` with status 0.
# Fails (never skips) when the archive is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."

ARCHIVE=${ARCHIVE:-target/image/pv-topology-webhook.tar}
PORT=${PORT:-19843}
METRICS_PORT=$((PORT + 1))
EC2_PORT=$((PORT + 2))
EC2_NAME=ec2.image-test.internal
BUILDAH=(buildah --storage-driver vfs)
DATA=tests/data/webhook

[[ -f $ARCHIVE ]] || { echo "image test: $ARCHIVE is missing (make image)" >&2; exit 1; }

work=$(mktemp -d)
ctr=
runner=
pids=()
# The webhook's own process (the one kubelet's runtime would signal): the
# descendant of this buildah run whose program is the webhook.
webhook_pid() {
    local queue=("$runner") pid child
    while ((${#queue[@]})); do
        pid=${queue[0]}; queue=("${queue[@]:1}")
        for child in $(cat /proc/"$pid"/task/*/children 2>/dev/null); do
            [[ $(cat /proc/"$child"/comm 2>/dev/null) == pv-topology-web* ]] && { echo "$child"; return 0; }
            queue+=("$child")
        done
    done
    return 1
}
cleanup() {
    # buildah run does not pass its own SIGTERM on: end the webhook itself.
    local pid
    if [[ -n $runner ]] && pid=$(webhook_pid); then kill -TERM "$pid" 2>/dev/null || true; fi
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [[ -n $ctr ]]; then
        # The image `from` put in the local store goes with the container.
        local image
        image=$("${BUILDAH[@]}" inspect --format '{{.FromImageID}}' "$ctr" 2>/dev/null || true)
        "${BUILDAH[@]}" rm "$ctr" >/dev/null 2>&1 || true
        [[ -n $image ]] && "${BUILDAH[@]}" rmi "$image" >/dev/null 2>&1 || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "image test: FAIL: $*" >&2; exit 1; }
ok() { echo "image test: ok: $*"; }

# The image's metadata, read from the archive itself: user, labels, files,
# the binary: static (no PT_INTERP) with cargo auditable's dependency list;
# the CycloneDX SBOM beside the archive.
python3 - "$ARCHIVE" <<'PY' || fail "image metadata"
import io, json, struct, sys, tarfile, zlib
with tarfile.open(sys.argv[1]) as tar:
    blob = lambda d: tar.extractfile("blobs/" + d.replace(":", "/")).read()
    manifest = json.loads(blob(json.loads(tar.extractfile("index.json").read())["manifests"][0]["digest"]))
    config = json.loads(blob(manifest["config"]["digest"]))["config"]
    files = {}
    for layer in manifest["layers"]:
        with tarfile.open(fileobj=io.BytesIO(blob(layer["digest"]))) as content:
            files.update({m.name: content.extractfile(m).read() for m in content if m.isfile()})
assert config["User"] == "65532:65532", config["User"]
labels = config["Labels"]
for key in ("source", "version", "licenses"):
    assert labels.get("org.opencontainers.image." + key), f"label {key} missing: {labels}"
assert labels["org.opencontainers.image.licenses"] == "Apache-2.0", labels
assert sorted(files) == ["etc/ssl/certs/ca-certificates.crt", "pv-topology-webhook"], sorted(files)
assert b"BEGIN CERTIFICATE" in files["etc/ssl/certs/ca-certificates.crt"]
elf = files["pv-topology-webhook"]
phoff, shoff = struct.unpack_from("<QQ", elf, 0x20)
phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from("<HHHHH", elf, 0x36)
types = [struct.unpack_from("<I", elf, phoff + i * phentsize)[0] for i in range(phnum)]
assert 3 not in types, "PT_INTERP: the binary is not static"
sections = [struct.unpack_from("<IIQQQQ", elf, shoff + i * shentsize) for i in range(shnum)]
names = sections[shstrndx]
name = lambda s: elf[names[4] + s[0]:elf.index(b"\0", names[4] + s[0])].decode()
dep = next(s for s in sections if name(s) == ".dep-v0")
packages = json.loads(zlib.decompress(elf[dep[4]:dep[4] + dep[5]]))["packages"]
assert any(p["name"] == "pv-topology-webhook" for p in packages)
shown = {k.rsplit(".", 1)[1]: v for k, v in labels.items() if k.startswith("org.opencontainers.image.")}
sbom = json.load(open(sys.argv[1].removesuffix(".tar") + ".cdx.json"))
assert sbom["bomFormat"] == "CycloneDX" and sbom["metadata"]["component"]["name"] == "pv-topology-webhook", sbom["metadata"]
print(f"image test: ok: user 65532:65532, source={shown['source']} version={shown['version']} "
      f"licenses={shown['licenses']}; two files; static binary; {len(packages)} packages in its "
      f"cargo auditable list; SBOM beside the archive ({len(sbom['components'])} components)")
PY

ctr=$("${BUILDAH[@]}" from --quiet --add-host "$EC2_NAME:127.0.0.1" "oci-archive:$ARCHIVE")
inside() { "${BUILDAH[@]}" run --isolation chroot "$@"; }

# The image's user (65532) writes the certificates: the directories are its.
mkdir -p "$work/certs" "$work/ec2"
chown 65532:65532 "$work/certs" "$work/ec2"
inside -v "$work/certs:/certs" "$ctr" -- /pv-topology-webhook certs --service pv-topology-webhook \
    --namespace pv-topology-webhook --out-dir /certs --extra-san localhost --extra-san 127.0.0.1 \
    --validity 1h >/dev/null 2>"$work/certs.log" || { cat "$work/certs.log" >&2; fail "certs inside the image"; }
# The test CA of the fake EC2 endpoint: another run of certs, valid for its names.
inside -v "$work/ec2:/ec2" "$ctr" -- /pv-topology-webhook certs --service ec2 --namespace test \
    --out-dir /ec2 --extra-san "$EC2_NAME" --extra-san localhost --validity 1h >/dev/null 2>"$work/ec2.log" \
    || { cat "$work/ec2.log" >&2; fail "certs for the fake EC2"; }
ok "certs inside the image wrote $(ls "$work/certs" | tr '\n' ' ')"

# A fake EC2 DescribeVolumes over HTTPS on loopback, signed by the test CA.
cat >"$work/ec2.py" <<'PY'
import http.server, ssl, sys, urllib.parse
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
        form = urllib.parse.parse_qs(body)
        vol = form.get("VolumeId.1", ["?"])[0]
        sys.stderr.write(f"host={self.headers.get('Host')} action={form.get('Action')} volume={vol}\n")
        xml = ('<DescribeVolumesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
               '<requestId>r</requestId><volumeSet><item><volumeId>%s</volumeId>'
               '<availabilityZone>us-east-1c</availabilityZone></item></volumeSet>'
               '</DescribeVolumesResponse>' % vol).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/xml")
        self.send_header("Content-Length", str(len(xml)))
        self.end_headers()
        self.wfile.write(xml)
    def log_message(self, *a): pass
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[2] + "/tls.crt", sys.argv[2] + "/tls.key")
srv = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()
PY
for port in "$PORT" "$METRICS_PORT" "$EC2_PORT"; do
    ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || fail "127.0.0.1:$port is already in use (PORT=… to move)"
done
python3 "$work/ec2.py" "$EC2_PORT" "$work/ec2" 2>"$work/ec2-requests.log" &
pids+=($!)

aws_env=(--env AWS_ACCESS_KEY_ID=AKIDTEST --env AWS_SECRET_ACCESS_KEY=test-secret
         --env AWS_EC2_METADATA_DISABLED=true)
lookup=(--aws-ebs-lookup --aws-region us-east-1 --lookup-timeout 10s)

inside -v "$work/certs:/certs:ro" -v "$work/ec2/ca.crt:/trust/ca.crt:ro" \
    --env SSL_CERT_FILE=/trust/ca.crt --env "AWS_ENDPOINT_URL_EC2=https://$EC2_NAME:$EC2_PORT" \
    "${aws_env[@]}" "$ctr" -- /pv-topology-webhook serve \
    --tls-cert-file /certs/tls.crt --tls-key-file /certs/tls.key \
    --listen "127.0.0.1:$PORT" --metrics-listen "127.0.0.1:$METRICS_PORT" \
    --shutdown-delay 0s --log-level info "${lookup[@]}" 2>"$work/serve.log" &
runner=$!
pids+=("$runner")

for _ in $(seq 300); do
    curl -fsS -o /dev/null "http://127.0.0.1:$METRICS_PORT/readyz" 2>/dev/null && break
    kill -0 "$runner" 2>/dev/null || { cat "$work/serve.log" >&2; fail "serve exited before ready"; }
    sleep 0.1
done
curl -fsS "http://127.0.0.1:$METRICS_PORT/readyz" >/dev/null || { cat "$work/serve.log" >&2; fail "/readyz"; }
ok "/readyz answers"

review() { # FILE: the answer of the webhook in the image, over TLS, by name
    curl -fsS --cacert "$work/certs/ca.crt" --resolve "pv-topology-webhook.pv-topology-webhook.svc:$PORT:127.0.0.1" \
        -H 'Content-Type: application/json' --data-binary "@$1" \
        "https://pv-topology-webhook.pv-topology-webhook.svc:$PORT/mutate"
}
answer=$(review "$DATA/gce-pd-csi-zonal.json") || fail "review over TLS"
grep -q '"allowed":true' <<<"$answer" && grep -q '"patch"' <<<"$answer" || fail "review answer: $answer"
ok "a review over TLS answers with a patch (GCE PD handle)"

patch_of() { python3 -c 'import base64, json, sys; print(base64.b64decode(json.load(sys.stdin)["response"]["patch"]).decode())'; }
answer=$(review "$DATA/ebs-csi.json") || fail "EBS review over TLS"
patch=$(patch_of <<<"$answer") || fail "EBS review without a patch: $answer"
grep -q 'us-east-1c' <<<"$patch" || fail "EBS zone not from the fake: $answer"
grep -q "host=$EC2_NAME:$EC2_PORT action=\['DescribeVolumes'\]" "$work/ec2-requests.log" \
    || fail "the fake EC2 was not called by name: $(cat "$work/ec2-requests.log")"
ok "EBS lookup inside the image: $EC2_NAME resolved (/etc/hosts), HTTPS verified with SSL_CERT_FILE (mounted test CA), zone us-east-1c"

metrics=$(curl -fsS "http://127.0.0.1:$METRICS_PORT/metrics") || fail "/metrics"
grep -q '^pv_topology_webhook_' <<<"$metrics" || fail "/metrics has no webhook series"
grep -q 'lookups_total{.*result="success"' <<<"$metrics" || grep -q 'lookups_total' <<<"$metrics" || fail "/metrics has no lookups"
ok "/metrics answers ($(grep -c '^pv_topology_webhook_' <<<"$metrics") series)"

pid=$(webhook_pid) || fail "the webhook's process under buildah run not found"
kill -TERM "$pid"
status=0
wait "$runner" || status=$?
pids=("${pids[@]/$runner}")
[[ $status == 0 ]] || { cat "$work/serve.log" >&2; fail "serve after SIGTERM: exit status $status"; }
ok "SIGTERM: serve exited with status 0"

# One-shot reviews inside the image (stdin → stdout), endpoint `localhost`.
review_inside() { # MOUNT-ARGS…: the zone in the answer, or the warning/denial
    inside "$@" --env "AWS_ENDPOINT_URL_EC2=https://localhost:$EC2_PORT" "${aws_env[@]}" "$ctr" -- \
        /pv-topology-webhook review "${lookup[@]}" <"$DATA/ebs-csi.json"
}
answer=$(review_inside -v "$work/ec2/ca.crt:/etc/ssl/certs/ca-certificates.crt:ro" 2>"$work/review.log") \
    || { cat "$work/review.log" >&2; fail "review with a bundle mounted over the image's"; }
grep -q 'us-east-1c' <<<"$(patch_of <<<"$answer")" || fail "review (mounted bundle): $answer"
ok "localhost resolved inside the image; a bundle mounted at /etc/ssl/certs/ca-certificates.crt is trusted"

answer=$(review_inside 2>"$work/review.log") || true
message=$(python3 -c 'import json, sys; r = json.load(sys.stdin)["response"]; print(r["allowed"], r["status"]["message"])' <<<"$answer") \
    || fail "review without the test CA: $answer"
[[ $message == False*UnknownIssuer* ]] || fail "the test CA was not refused for its issuer by the image's own roots: $message"
ok "the image's own roots refuse the test CA: ${message#False }"
echo "image test: all checks passed"
