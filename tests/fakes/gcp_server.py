#!/usr/bin/env python3
"""A fake of Google Cloud's APIs the suite calls, for tests: the GCE
metadata server, Compute Engine disks.get and regionDisks.get, Security
Token Service (STS) token exchange, IAM Credentials generateAccessToken,
and a registry's Docker token endpoint (what a pull does with a token).

Written from Google's documented APIs (the metadata server's
computeMetadata/v1 paths, the Compute v1 REST reference, the STS v1 and
IAM Credentials v1 references), because no emulator of any of them exists
(see ../shared/reference/upstream-gcp-azure-openstack.md, section D). Python
3 standard library only. It binds 127.0.0.1 on a free port and prints the
port on its first line.

One scenario file (see tests/data/gcp/scenario.json):
  {"metadata": {"tree": {"project/project-id": "demo-project",
                         "instance/service-accounts/default/email": "...",
                         "instance/service-accounts/default/scopes": "scope1\\nscope2",
                         "instance/attributes/google-dockercfg": "{...}"},
                "token": {"expires_in": 3599, "delay_seconds": 0, "status": 200}
                         (null: the instance has no service account, 404)},
   "compute": {"disks": [{"project", "zone", "name", "delay_seconds"?}],
               "regionDisks": [{"project", "region", "name", "replicaZones": [zone, zone]}],
               "regions": {"us-central1": ["us-central1-a", ...]}  (regions.get, any project;
                          an entry that is a https:// URL is answered as it is),
               "regions_fail_after": N  (regions.get answers 503 backendError after N answers),
               "delay_seconds": 0.2  (every Compute answer waits this long first),
               "denied_projects": ["p"]},
   "sts": {"audience": "identitynamespace:P.svc.id.goog:PROVIDER",
           "subject_tokens": ["the accepted service-account JWTs"], "expires_in": 3600,
           "echo_subject_token": true},
   "iam": {"service_accounts": ["app@P.iam.gserviceaccount.com"], "max_lifetime": 3600}}

Metadata tree paths are relative to /computeMetadata/v1/; a path ending in
"/" lists the tree's keys under it, as the server lists directories. The
token endpoint's "expires_in" is the "token expires in N seconds" mode:
each answer is a new token (ya29.metadata-1, -2, ...), so a refresh shows.

What it enforces, as the real services do:
  - metadata: `Metadata-Flavor: Google` required (403 without); a request
    carrying `X-Forwarded-For` refused (403), as the real server refuses
    proxied requests (the exact text of its refusal is not documented; ours
    is our own); answers carry `Metadata-Flavor: Google`.
  - Compute: a bearer token this fake issued and that has not expired (401
    otherwise, Google's UNAUTHENTICATED body); a metadata token whose scopes
    include neither cloud-platform nor compute is refused 403
    (insufficientPermissions); a project in denied_projects is 403 with
    Google's `forbidden` error body; an absent disk is 404 `notFound`.
  - STS: grant_type, requested_token_type and subject_token_type as
    documented; `scope` required, each scope one Google knows (KNOWN_SCOPES;
    400 `invalid_scope` otherwise, as STS refuses a malformed scope), the
    federated token carrying the scopes asked for; an unknown audience is
    `invalid_target`; a subject token not
    in subject_tokens is `invalid_grant`, and with echo_subject_token its
    description quotes the token (as a careless server might), so that the
    tests prove the client cuts it out.
  - IAM Credentials: a bearer token this fake issued, whose scopes include
    cloud-platform or iam (403 PERMISSION_DENIED, ErrorInfo reason
    ACCESS_TOKEN_SCOPE_INSUFFICIENT otherwise, as Google refuses a token
    without the API's scopes); an account not in service_accounts is 403
    PERMISSION_DENIED with an ErrorInfo reason IAM_PERMISSION_DENIED; `scope`
    a non-empty list of known scopes and `lifetime` "<n>s" up to max_lifetime
    (400 INVALID_ARGUMENT otherwise); the token carries the scopes asked for.
  - Registry (`GET /v2/token`, Artifact Registry's and Container Registry's
    Docker token endpoint): Basic `_token` (or `oauth2accesstoken`) and an
    unexpired token this fake issued (401 otherwise) whose scopes can pull:
    cloud-platform(.read-only) or devstorage.* (403 DENIED otherwise), so a
    test can pull with what the credential provider answered. The refusals'
    texts are our own.

"documents": {"/path": "body", or {"body": "...", "repeat": N, "status": 200}} are
served to plain GETs of those paths (no Metadata-Flavor needed): a Docker config
at the URL an instance attribute such as google-dockercfg-url names. "repeat"
sends the body N times (an oversized answer).

GET /__requests answers {"METHOD /path": count} of the requests so far (not
counting itself), so tests can count fetches; besides, "connections" counts the
connections accepted and "max in flight compute" the most Compute requests
answered at once. POST /__sts/subject_tokens with a
token as its body adds it to sts.subject_tokens (not counted either): a test
whose tokens are issued while it runs (by a real kube-apiserver) tells the fake
each one before the token is exchanged.

usage: gcp_server.py SCENARIO.json
"""
import base64
import json
import re
import time
from collections import Counter
from datetime import datetime, timezone
from urllib.parse import parse_qs, unquote, urlsplit

import fakebase
from fakebase import LOCK, REQUESTS, FakeHandler, serve

METADATA_ROOT = "/computeMetadata/v1/"
COMPUTE_URL = "https://www.googleapis.com/compute/v1/"
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
SCOPE_BASE = "https://www.googleapis.com/auth/"
COMPUTE_SCOPES = {CLOUD_PLATFORM, SCOPE_BASE + "compute", SCOPE_BASE + "compute.readonly"}
# What a caller's token needs to call IAM Credentials (its discovery document's scopes).
IAM_SCOPES = {CLOUD_PLATFORM, SCOPE_BASE + "iam"}
# Scopes that let a token pull from Artifact Registry or Container Registry.
PULL_SCOPES = {CLOUD_PLATFORM, SCOPE_BASE + "cloud-platform.read-only", SCOPE_BASE + "devstorage.read_only",
               SCOPE_BASE + "devstorage.read_write", SCOPE_BASE + "devstorage.full_control"}
# Google OAuth 2.0 scopes this fake knows ("OAuth 2.0 Scopes for Google APIs"): a scope
# outside it is refused as Google refuses a scope it does not know (STS: invalid_scope).
KNOWN_SCOPES = COMPUTE_SCOPES | IAM_SCOPES | PULL_SCOPES | {
    SCOPE_BASE + name for name in ("userinfo.email", "logging.write", "monitoring.write", "monitoring",
                                   "trace.append", "servicecontrol", "service.management.readonly")}
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN = "urn:ietf:params:oauth:token-type:access_token"
JWT = "urn:ietf:params:oauth:token-type:jwt"

ISSUED = {}  # token -> (expires at, scopes)
COMPUTE_IN_FLIGHT = [0]
SERIAL = Counter()


def issue(kind, lifetime, scopes):
    with LOCK:
        SERIAL[kind] += 1
        token = f"ya29.{kind}-{SERIAL[kind]}"
        ISSUED[token] = (time.time() + lifetime, set(scopes))
    return token


def google_error(code, status, message, reason=None, info_reason=None, info_domain="iam.googleapis.com"):
    error = {"code": code, "message": message, "status": status}
    if reason:
        error["errors"] = [{"message": message, "domain": "global", "reason": reason}]
    if info_reason:
        error["details"] = [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                             "reason": info_reason, "domain": info_domain}]
    return {"error": error}


UNAUTHENTICATED = google_error(
    401, "UNAUTHENTICATED",
    "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or "
    "other valid authentication credential.", reason="authError")


class Handler(FakeHandler):
    def setup(self):
        super().setup()
        self.count("connections")

    def bearer(self):
        """The scopes of a valid bearer token this fake issued, or None."""
        auth = self.headers.get("Authorization", "")
        if not auth.startswith("Bearer "):
            return None
        with LOCK:
            expires, scopes = ISSUED.get(auth[len("Bearer "):], (0, set()))
        return scopes if expires > time.time() else None

    def body_json(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length > 1 << 20:
            return None
        raw = self.rfile.read(length)
        if "application/x-www-form-urlencoded" in self.headers.get("Content-Type", ""):
            return {k: v[0] for k, v in parse_qs(raw.decode()).items()}
        try:
            return json.loads(raw or b"null")
        except ValueError:
            return None

    def do_GET(self):
        url = urlsplit(self.path)
        path = unquote(url.path)
        if path == "/__requests":
            return self.counters()
        self.count(f"{self.command} {path}")
        if path.startswith(METADATA_ROOT) or path.rstrip("/") == METADATA_ROOT.rstrip("/"):
            return self.metadata(path[len(METADATA_ROOT):], parse_qs(url.query))
        if path.startswith("/compute/v1/"):
            return self.compute(path[len("/compute/v1/"):])
        if path == "/v2/token":
            return self.registry_token(parse_qs(url.query))
        if path in self.scenario.get("documents", {}):
            return self.document(self.scenario["documents"][path])
        return self.reply(404, google_error(404, "NOT_FOUND", f"no such path {path}"))

    def do_POST(self):
        path = unquote(urlsplit(self.path).path)
        if path == "/__sts/subject_tokens":
            return self.accept_subject_token()
        self.count(f"{self.command} {path}")
        if path == "/v1/token":
            return self.sts()
        match = re.fullmatch(r"/v1/projects/-/serviceAccounts/([^/]+):generateAccessToken", path)
        if match:
            return self.generate_access_token(match.group(1))
        return self.reply(404, google_error(404, "NOT_FOUND", f"no such path {path}"))

    def document(self, document):
        if isinstance(document, str):
            document = {"body": document}
        body = str(document.get("body", "")) * int(document.get("repeat", 1))
        try:
            return self.reply(int(document.get("status", 200)), body, "application/json")
        except (BrokenPipeError, ConnectionResetError):
            pass  # a client that stops reading an oversized answer

    # --- GCE metadata server -------------------------------------------------

    def metadata(self, path, query):
        flavor = ("Metadata-Flavor", "Google")
        if self.headers.get("X-Forwarded-For") is not None:
            return self.reply(403, "Request refused: it carries X-Forwarded-For.", "text/plain", [flavor])
        if self.headers.get("Metadata-Flavor") != "Google":
            return self.reply(403, "Your client does not have permission to get URL from this server. "
                              "Missing Metadata-Flavor:Google header.", "text/plain", [flavor])
        config = self.scenario.get("metadata", {})
        tree = config.get("tree", {})
        email = tree.get("instance/service-accounts/default/email")
        if path in ("instance/service-accounts/default/token", f"instance/service-accounts/{email}/token"):
            return self.metadata_token(config, tree, flavor)
        if path.endswith("/scopes") and query.get("alt") == ["json"] and path in tree:
            scopes = [s for s in str(tree[path]).splitlines() if s.strip()]
            return self.reply(200, scopes, "application/json", [flavor])
        if path in tree:
            return self.reply(200, str(tree[path]), "application/text", [flavor])
        if path == "" or path.endswith("/"):
            children = sorted({key[len(path):].split("/")[0] + ("/" if "/" in key[len(path):] else "")
                               for key in tree if key.startswith(path) and key != path})
            if children:
                return self.reply(200, "\n".join(children) + "\n", "application/text", [flavor])
        return self.reply(404, "Not Found", "text/html", [flavor])

    def metadata_token(self, config, tree, flavor):
        token = config.get("token", {})
        if token is None:
            return self.reply(404, "Not Found", "text/html", [flavor])
        time.sleep(token.get("delay_seconds", 0))
        status = token.get("status", 200)
        if status != 200:
            return self.reply(status, token.get("body", "error"), "text/plain", [flavor])
        scopes = str(tree.get("instance/service-accounts/default/scopes", "")).split()
        lifetime = token.get("expires_in", 3599)
        answer = {"access_token": issue("metadata", lifetime, scopes), "expires_in": lifetime,
                  "token_type": "Bearer"}
        return self.reply(200, answer, "application/json", [flavor])

    # --- Compute Engine -----------------------------------------------------

    def compute(self, path):
        config = self.scenario.get("compute", {})
        with LOCK:
            COMPUTE_IN_FLIGHT[0] += 1
            REQUESTS["max in flight compute"] = max(REQUESTS["max in flight compute"], COMPUTE_IN_FLIGHT[0])
        self.in_compute = True
        try:
            time.sleep(config.get("delay_seconds", 0))
            return self.compute_answer(path, config)
        finally:
            self.leave_compute()

    def leave_compute(self):
        if getattr(self, "in_compute", False):
            self.in_compute = False
            with LOCK:
                COMPUTE_IN_FLIGHT[0] -= 1

    def reply(self, *args, **kwargs):
        # A call stops being in flight before its answer is written: the client
        # may send its next call as soon as it has read this one, and counting
        # that one while this thread has not yet left would see one too many.
        self.leave_compute()
        return super().reply(*args, **kwargs)

    def compute_answer(self, path, config):
        region = re.fullmatch(r"projects/([^/]+)/regions/([^/]+)", path)
        if region:
            return self.region(path, config, *region.groups())
        match = re.fullmatch(r"projects/([^/]+)/(zones|regions)/([^/]+)/disks/([^/]+)", path)
        if not match:
            return self.reply(404, google_error(404, "NOT_FOUND", f"no such path {path}"))
        project, kind, location, name = match.groups()
        refusal = self.compute_auth()
        if refusal:
            return self.reply(*refusal)
        method = "compute.disks.get" if kind == "zones" else "compute.regionDisks.get"
        if project in config.get("denied_projects", []):
            message = f"Required '{method}' permission for '{path}'"
            return self.reply(403, google_error(403, "PERMISSION_DENIED", message, reason="forbidden"))
        field = "disks" if kind == "zones" else "regionDisks"
        where = "zone" if kind == "zones" else "region"
        for disk in config.get(field, []):
            if (disk.get("project"), disk.get(where), disk.get("name")) == (project, location, name):
                time.sleep(disk.get("delay_seconds", 0))
                return self.reply(200, self.disk(project, kind, location, disk))
        message = f"The resource '{path}' was not found"
        return self.reply(404, google_error(404, "NOT_FOUND", message, reason="notFound"))

    def compute_auth(self):
        """(status, body) refusing a Compute request's credentials, or None."""
        if "Authorization" not in self.headers:
            return 401, google_error(
                401, "UNAUTHENTICATED", "Request is missing required authentication credential.",
                reason="required")
        scopes = self.bearer()
        if scopes is None:
            return 401, UNAUTHENTICATED
        if not scopes & COMPUTE_SCOPES:
            return 403, google_error(
                403, "PERMISSION_DENIED", "Request had insufficient authentication scopes.",
                reason="insufficientPermissions")
        return None

    def region(self, path, config, project, name):
        """regions.get: the region's zones, as zone URLs."""
        refusal = self.compute_auth()
        if refusal:
            return self.reply(*refusal)
        if project in config.get("denied_projects", []):
            message = f"Required 'compute.regions.get' permission for '{path}'"
            return self.reply(403, google_error(403, "PERMISSION_DENIED", message, reason="forbidden"))
        with LOCK:
            answered = REQUESTS[f"GET /compute/v1/{path}"]
        if answered > config.get("regions_fail_after", answered):
            message = "Internal error. Please try again or contact Google Support."
            return self.reply(503, google_error(503, "UNAVAILABLE", message, reason="backendError"))
        zones = config.get("regions", {}).get(name)
        if zones is None:
            message = f"The resource '{path}' was not found"
            return self.reply(404, google_error(404, "NOT_FOUND", message, reason="notFound"))
        prefix = f"{COMPUTE_URL}projects/{project}/"
        return self.reply(200, {"kind": "compute#region", "name": name, "status": "UP",
                                "zones": [z if z.startswith("https://") else f"{prefix}zones/{z}" for z in zones],
                                "selfLink": f"{prefix}regions/{name}"})

    @staticmethod
    def disk(project, kind, location, disk):
        prefix = f"{COMPUTE_URL}projects/{project}/"
        answer = {"kind": "compute#disk", "id": str(abs(hash(disk["name"])) % 10**19),
                  "name": disk["name"], "sizeGb": str(disk.get("sizeGb", 10)), "status": "READY",
                  "selfLink": f"{prefix}{kind}/{location}/disks/{disk['name']}"}
        if kind == "zones":
            answer["zone"] = f"{prefix}zones/{location}"
            answer["type"] = f"{prefix}zones/{location}/diskTypes/pd-balanced"
        else:
            answer["region"] = f"{prefix}regions/{location}"
            answer["replicaZones"] = [f"{prefix}zones/{z}" for z in disk.get("replicaZones", [])]
            answer["type"] = f"{prefix}regions/{location}/diskTypes/pd-balanced"
        return answer

    # --- Artifact Registry / Container Registry --------------------------------

    def registry_token(self, query):
        """The Docker registry token endpoint (`GET /v2/token?scope=repository:R:pull&service=S`)
        as a pull after `docker login -u _token` meets it: Basic credentials whose user is
        `_token` or `oauth2accesstoken` and whose password is an unexpired token this fake
        issued; the token must carry a pull scope (cloud-platform or devstorage). The
        refusals' texts are our own."""
        def denied(status, code, message):
            return self.reply(status, {"errors": [{"code": code, "message": message}]},
                              headers=[("Www-Authenticate", 'Basic realm="fake registry"')] if status == 401 else ())
        auth = self.headers.get("Authorization", "")
        try:
            user, _, password = base64.b64decode(auth[len("Basic "):], validate=True).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            user, password = "", ""
        if not auth.startswith("Basic ") or user not in ("_token", "oauth2accesstoken"):
            return denied(401, "UNAUTHORIZED", "Unauthenticated request: Basic credentials of _token are required.")
        with LOCK:
            expires, scopes = ISSUED.get(password, (0, set()))
        if expires <= time.time():
            return denied(401, "UNAUTHORIZED", "The access token is invalid or expired.")
        repository = query.get("scope", [""])[0]
        if not scopes & PULL_SCOPES:
            return denied(403, "DENIED", f"Permission \"artifactregistry.repositories.downloadArtifacts\" denied for "
                          f"{repository or 'the repository'}: the access token has no pull scope.")
        return self.reply(200, {"token": issue("registry", 300, []), "expires_in": 300})

    # --- STS ----------------------------------------------------------------

    def sts(self):
        config = self.scenario.get("sts", {})
        body = self.body_json()
        if not isinstance(body, dict):
            return self.reply(400, {"error": "invalid_request", "error_description": "The request body is not valid."})
        for field, want in (("grant_type", TOKEN_EXCHANGE), ("requested_token_type", ACCESS_TOKEN),
                            ("subject_token_type", JWT)):
            if body.get(field) != want:
                return self.reply(400, {"error": "invalid_request",
                                        "error_description": f"Invalid value for \"{field}\"."})
        scopes = str(body.get("scope") or "").split()
        if not scopes:
            return self.reply(400, {"error": "invalid_request", "error_description": "\"scope\" is required."})
        unknown = [s for s in scopes if s not in KNOWN_SCOPES]
        if unknown:
            return self.reply(400, {"error": "invalid_scope",
                                    "error_description": f"The scope {unknown[0]} is invalid."})
        if body.get("audience") != config.get("audience"):
            return self.reply(400, {
                "error": "invalid_target",
                "error_description": "The target service indicated by the \"audience\" parameters is invalid. "
                                     "This might either be because the pool or provider is disabled or deleted "
                                     "or because it doesn't exist."})
        subject = body.get("subject_token", "")
        if subject not in config.get("subject_tokens", []):
            shown = subject if config.get("echo_subject_token") else "the given token"
            return self.reply(400, {"error": "invalid_grant",
                                    "error_description": f"The subject token {shown} is invalid or expired."})
        lifetime = config.get("expires_in", 3600)
        token = issue("federated", lifetime, scopes)
        return self.reply(200, {"access_token": token, "issued_token_type": ACCESS_TOKEN,
                                "token_type": "Bearer", "expires_in": lifetime})

    def accept_subject_token(self):
        length = int(self.headers.get("Content-Length") or 0)
        token = self.rfile.read(min(length, 1 << 20)).decode().strip()
        if not token:
            return self.reply(400, {"error": "no token in the body"})
        with LOCK:
            self.scenario.setdefault("sts", {}).setdefault("subject_tokens", []).append(token)
        return self.reply(200, {})

    # --- IAM Credentials ----------------------------------------------------

    def generate_access_token(self, account):
        config = self.scenario.get("iam", {})
        caller = self.bearer()
        if caller is None:
            return self.reply(401, UNAUTHENTICATED)
        if not caller & IAM_SCOPES:
            return self.reply(403, google_error(
                403, "PERMISSION_DENIED", "Request had insufficient authentication scopes.",
                info_reason="ACCESS_TOKEN_SCOPE_INSUFFICIENT", info_domain="googleapis.com"))
        body = self.body_json()
        scopes = body.get("scope") if isinstance(body, dict) else None
        if not isinstance(scopes, list) or not scopes or not all(isinstance(s, str) for s in scopes):
            return self.reply(400, google_error(400, "INVALID_ARGUMENT", "Scope required."))
        unknown = [s for s in scopes if s not in KNOWN_SCOPES]
        if unknown:
            return self.reply(400, google_error(400, "INVALID_ARGUMENT", f"Invalid scope: {unknown[0]}."))
        lifetime = re.fullmatch(r"(\d+)s", str(body.get("lifetime", "3600s")))
        if not lifetime or not 1 <= int(lifetime.group(1)) <= config.get("max_lifetime", 3600):
            return self.reply(400, google_error(400, "INVALID_ARGUMENT", "Invalid lifetime."))
        if account not in config.get("service_accounts", []):
            return self.reply(403, google_error(
                403, "PERMISSION_DENIED",
                "Permission 'iam.serviceAccounts.getAccessToken' denied on resource (or it may not exist).",
                info_reason="IAM_PERMISSION_DENIED"))
        seconds = int(lifetime.group(1))
        token = issue("impersonated", seconds, scopes)
        expires = datetime.fromtimestamp(time.time() + seconds, timezone.utc)
        return self.reply(200, {"accessToken": token,
                                "expireTime": expires.strftime("%Y-%m-%dT%H:%M:%S.%f000Z")})


class Server(fakebase.Server):
    # Google's front ends take every connection at once; Python's default backlog of 5
    # would hold back a burst of concurrent calls in SYN retries.
    request_queue_size = 1024


def main():
    serve(Handler, Server)


if __name__ == "__main__":
    main()
