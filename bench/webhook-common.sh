# Sourced by the webhook benchmarks (webhook.sh, webhook-vs-labeler.sh,
# profile-webhook.sh): a work directory removed at exit, the servers in `pids`
# stopped at exit, and a serving certificate for 127.0.0.1 from the webhook's
# own `certs` subcommand in "$work/certs".
work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

webhook_certs() { # BIN
    "$1" certs --service bench --namespace bench --out-dir "$work/certs" \
        --extra-san 127.0.0.1 --validity 1h >/dev/null 2>&1
}
