#!/usr/bin/env python3
"""A fake of the Azure APIs the suite calls, for tests: the Instance
Metadata Service (managed identity tokens, instance and load balancer
metadata), the Entra ID (Azure AD) v2.0 token endpoint, Azure Resource
Manager Disks.Get (and ARM's /metadata/endpoints), and an Azure Container
Registry's /v2/ challenge and /oauth2/exchange.

Written from Microsoft's documented APIs (IMDS's REST reference and its
managed-identity token how-to, the Microsoft identity platform's OAuth 2.0
client-credentials reference and its AADSTS error codes, the ARM REST
reference for Disks - Get and ARM's common error shape, Azure/acr's
docs/AAD-OAuth.md), because no emulator of any of them exists (see
../shared/reference/upstream-gcp-azure-openstack.md, section D). Where a
documented message is unknown, the text is our own. Python 3 standard
library only. It binds 127.0.0.1 on a free port and prints the port on its
first line.

One scenario file (see tests/data/azure/scenario.json):
  {"imds": {"tree": {"metadata/instance": {...}, "metadata/loadbalancer": {...}},
            "identity": {"system_assigned": {"client_id": "..."}   (null: the VM has none),
                         "user_assigned": [{"client_id": "...", "msi_res_id": "/subscriptions/..."}],
                         "expires_in": 86399, "numbers": false, "fields": "both",
                         "delay_seconds": 0, "fail_first": 0}},
   "entra": {"tenants": {"TENANT": {"CLIENT": {"secrets": ["..."], "assertions": ["..."]}}},
             "expires_in": 3599, "delay_seconds": 0, "echo_credentials": false},
   "arm": {"disks": [{"subscription", "resourceGroup", "name", "location",
                      "zones": ["1"], "sku": "Premium_LRS", "delay_seconds"?}],
           "denied_subscriptions": ["..."],
           "metadata_endpoints": [{"name": "...", "resourceManager": "...", ...}]},
   "acr": {"tenant": "TENANT", "refresh_token_lifetime": 10800,
           "challenge_status": 401, "www_authenticate": null, "realm_host": null,
           "realm_scheme": "http", "echo_access_token": false}}

Modes:
  - imds.identity.expires_in / entra.expires_in: short-lived tokens (each
    answer is a new token: imds-token-1, -2, ..., secret-token-N,
    assertion-token-N), so a refresh shows; "numbers": true sends IMDS's
    expires_in/expires_on as numbers instead of its documented strings;
    "fields": "expires_in" or "expires_on" sends only that one;
    "fail_first": N answers the first N IMDS token requests 500 (IMDS busy,
    which clients retry); "delay_seconds" slows each token answer.
  - entra.echo_credentials / acr.echo_access_token: error descriptions
    quote the secret, assertion or token that was sent (as a careless
    server might), so that tests prove the client cuts it out.
  - acr.challenge_status / www_authenticate / realm_host: a registry whose
    /v2/ answers another status, another challenge, or a realm elsewhere;
    acr.realm_scheme "https": the realm as a registry reached over TLS
    (through tls_proxy.py) names it.

What it enforces, as the real services do:
  - IMDS: `Metadata: true` required (400 bad_request_102 "Required metadata
    header not specified"); a request carrying X-Forwarded-For refused
    (400; the text is our own); api-version required; an identity neither
    assigned (system) nor listed (client_id / msi_res_id / object_id) is 400
    invalid_request "Identity not found"; the resource must be given.
    /metadata/instance and /metadata/loadbalancer (and paths under them)
    are served from imds.tree.
  - Entra ID: POST /{tenant}/oauth2/v2.0/token, form-encoded:
    grant_type=client_credentials (AADSTS70003 otherwise), a scope ending in
    /.default (AADSTS1002012), a known tenant (AADSTS90002) and client
    (AADSTS700016), a listed client_secret (401 invalid_client,
    AADSTS7000215) or a client_assertion of type jwt-bearer that is listed
    (invalid_client, AADSTS700211), neither (AADSTS7000216). Error bodies
    carry error, error_description, error_codes, timestamp, trace_id,
    correlation_id as Entra's do.
  - IMDS api-versions: the identity endpoint takes IMDS's published versions
    from 2018-02-01 (400 invalid_request otherwise; the text is our own);
    /metadata/instance and /metadata/loadbalancer answer as
    metadata_server.py does (400 with newest-versions; the load balancer
    from 2020-10-01).
  - ARM: api-version required (MissingApiVersionParameter), well-formed
    (InvalidApiVersionParameter) and one Disks publishes (DISKS_VERSIONS;
    NoRegisteredProviderFound otherwise, listing them); /metadata/endpoints
    answers its list of clouds for 2019-05-01, 2020-06-01 and 2022-09-01,
    the older single-cloud object for 2015-01-01, and 400
    InvalidApiVersionParameter otherwise; a bearer token
    this fake issued for ARM's audience (401 AuthenticationFailed when
    missing, InvalidAuthenticationToken when unknown,
    ExpiredAuthenticationToken when expired,
    InvalidAuthenticationTokenAudience for another audience); a denied
    subscription is 403 AuthorizationFailed; an absent disk 404
    ResourceNotFound (ResourceGroupNotFound when no disk is in that group).
    Path segments are matched case-insensitively, as ARM matches them.
  - ACR: GET /v2/ without credentials is 401 with `Www-Authenticate: Bearer
    realm="http://HOST/oauth2/token",service="HOST"` (HOST from the Host
    header); POST /oauth2/exchange takes grant_type=access_token (the
    documented form) or access_token_refresh_token (deprecated, counted
    apart), service equal to HOST, acr.tenant, and an unexpired token this
    fake issued for ACR's or ARM's audience; it answers a JWT-shaped
    refresh_token whose payload has exp.

GET /__requests answers {"METHOD /path": count} of the requests so far (not
counting itself), plus "exchange grant_type=G" counts and, for each request
with an api-version V, "api-version=V GET /path", so tests can count fetches
and see which grant and which api-version were used.

POST /__entra/assertions?tenant=TENANT&client_id=CLIENT with a token as its
body adds it to entra.tenants.TENANT.CLIENT.assertions (tenant and client
added when absent; not counted): a test whose service-account tokens are
issued while it runs (by a real kube-apiserver) tells the fake each one
before it is presented as a client assertion.

usage: azure_server.py SCENARIO.json
"""
import base64
import json
import re
import time
import uuid
from collections import Counter
from datetime import datetime, timezone
from urllib.parse import parse_qs, unquote, urlsplit

from fakebase import LOCK, FakeHandler, serve
from metadata_server import AZURE_VERSIONS, azure_version_error

JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
ARM_AUDIENCES = {"https://management.core.windows.net", "https://management.azure.com"}
ACR_AUDIENCE = "https://containerregistry.azure.net"

# The api-versions IMDS's identity endpoint takes ("2018-02-01 or later", its
# managed-identity how-to), of IMDS's published ones.
IMDS_TOKEN_VERSIONS = [v for v in AZURE_VERSIONS if v >= "2018-02-01"]
# Microsoft.Compute/disks' published api-versions (the ARM REST reference's
# version list for Disks; the 2022 and later ones end in -02).
DISKS_VERSIONS = [
    "2016-04-30-preview", "2017-03-30", "2018-04-01", "2018-06-01", "2018-09-30", "2019-03-01",
    "2019-07-01", "2019-11-01", "2020-05-01", "2020-06-30", "2020-09-30", "2020-12-01", "2021-04-01",
    "2021-08-01", "2021-12-01", "2022-03-02", "2022-07-02", "2023-01-02", "2023-04-02", "2023-10-02",
    "2024-03-02", "2025-01-02",
]
# ARM's /metadata/endpoints: the list of clouds from 2019-05-01 on; 2015-01-01
# answers the older single-cloud object.
METADATA_ENDPOINTS_VERSIONS = ["2019-05-01", "2020-06-01", "2022-09-01"]
LEGACY_METADATA_ENDPOINTS_VERSION = "2015-01-01"
API_VERSION_FORMAT = re.compile(r"\d{4}-\d{2}-\d{2}(-preview)?")

ISSUED = {}  # token -> (expires at, audience)
SERIAL = Counter()


def audience_of(resource):
    """A resource or scope as one audience: no /.default, no trailing /."""
    resource = resource.strip()
    if resource.endswith("/.default"):
        resource = resource[: -len("/.default")]
    return resource.rstrip("/")


def issue(kind, lifetime, audience):
    with LOCK:
        SERIAL[kind] += 1
        token = f"{kind}-token-{SERIAL[kind]}"
        ISSUED[token] = (time.time() + lifetime, audience_of(audience))
    return token


def b64url(data):
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def entra_error(error, code, description):
    now = datetime.now(timezone.utc)
    trace = str(uuid.uuid4())
    return {"error": error,
            "error_description": f"AADSTS{code}: {description} Trace ID: {trace} "
                                 f"Correlation ID: {uuid.uuid4()} Timestamp: {now:%Y-%m-%d %H:%M:%SZ}",
            "error_codes": [code], "timestamp": f"{now:%Y-%m-%d %H:%M:%SZ}", "trace_id": trace,
            "correlation_id": str(uuid.uuid4()),
            "error_uri": f"https://login.microsoftonline.com/error?code={code}"}


def arm_error(code, message):
    return {"error": {"code": code, "message": message}}


def acr_error(code, message):
    return {"errors": [{"code": code, "message": message, "detail": None}]}


class Handler(FakeHandler):
    def form(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(min(length, 1 << 20)).decode(errors="replace")
        return {k: v[0] for k, v in parse_qs(raw, keep_blank_values=True).items()}

    def bearer(self):
        """(expires at, audience) of the bearer token, or None when absent."""
        auth = self.headers.get("Authorization", "")
        if not auth.startswith("Bearer "):
            return None
        with LOCK:
            return ISSUED.get(auth[len("Bearer "):], (0, ""))

    def do_GET(self):
        url = urlsplit(self.path)
        path = unquote(url.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        if path == "/__requests":
            return self.counters()
        self.count(f"GET {path}")
        if "api-version" in query:
            self.count(f"api-version={query['api-version']} GET {path}")
        if path == "/metadata/identity/oauth2/token":
            return self.imds_token(query)
        if path.startswith("/metadata/instance") or path.startswith("/metadata/loadbalancer"):
            return self.imds_tree(path.strip("/"), query)
        if path == "/metadata/endpoints":
            return self.metadata_endpoints(query)
        if path.lower().startswith("/subscriptions/"):
            return self.arm_disk(path, query)
        if path in ("/v2/", "/v2"):
            return self.acr_challenge()
        return self.reply(404, arm_error("NotFound", f"no such path {path}"))

    def do_POST(self):
        url = urlsplit(self.path)
        path = unquote(url.path)
        if path == "/__entra/assertions":
            return self.accept_assertion({k: v[0] for k, v in parse_qs(url.query).items()})
        self.count(f"POST {path}")
        parts = path.strip("/").split("/")
        if len(parts) == 4 and parts[1:] == ["oauth2", "v2.0", "token"]:
            return self.entra_token(parts[0])
        if path == "/oauth2/exchange":
            return self.acr_exchange()
        return self.reply(404, arm_error("NotFound", f"no such path {path}"))

    # --- IMDS -----------------------------------------------------------------

    def imds_refusal(self):
        if self.headers.get("X-Forwarded-For") is not None:
            return {"error": "invalid_request",
                    "error_description": "Requests carrying X-Forwarded-For are refused."}
        if self.headers.get("Metadata") != "true":
            return {"error": "bad_request_102", "error_description": "Required metadata header not specified"}
        return None

    def imds_token(self, query):
        refusal = self.imds_refusal()
        if refusal:
            return self.reply(400, refusal)
        version = query.get("api-version", "")
        if not version:
            return self.reply(400, {"error": "invalid_request",
                                    "error_description": "Required query variable 'api-version' is missing"})
        if version not in IMDS_TOKEN_VERSIONS:
            # The identity endpoint's own text for it is not documented; ours.
            return self.reply(400, {"error": "invalid_request",
                                    "error_description": f"api-version {version} is not supported"})
        config = self.scenario.get("imds", {}).get("identity", {})
        with LOCK:
            SERIAL["imds-failures"] += 1
            failing = SERIAL["imds-failures"] <= config.get("fail_first", 0)
        if failing:
            return self.reply(500, {"error": "unknown", "error_description": "IMDS is busy."})
        time.sleep(config.get("delay_seconds", 0))
        resource = query.get("resource", "")
        if not resource:
            return self.reply(400, {"error": "invalid_request",
                                    "error_description": "Required audience parameter not specified"})
        chosen = [(k, query[k]) for k in ("client_id", "msi_res_id", "object_id") if query.get(k)]
        identity = None
        if not chosen:
            identity = config.get("system_assigned")
        elif len(chosen) == 1:
            key, value = chosen[0]
            identity = next((i for i in config.get("user_assigned", [])
                             if str(i.get(key, "")).lower() == value.lower()), None)
        if identity is None:
            return self.reply(400, {"error": "invalid_request", "error_description": "Identity not found"})
        lifetime = config.get("expires_in", 86399)
        now = int(time.time())
        token = issue("imds", lifetime, resource)
        answer = {"access_token": token, "client_id": identity.get("client_id", ""),
                  "ext_expires_in": lifetime, "not_before": now, "resource": resource,
                  "token_type": "Bearer"}
        fields = config.get("fields", "both")
        if fields in ("both", "expires_in"):
            answer["expires_in"] = lifetime
        if fields in ("both", "expires_on"):
            answer["expires_on"] = now + lifetime
        if not config.get("numbers"):
            answer = {k: (str(v) if isinstance(v, int) else v) for k, v in answer.items()}
        return self.reply(200, answer)

    def imds_tree(self, path, query):
        refusal = self.imds_refusal()
        if refusal:
            return self.reply(400, {"error": refusal["error_description"]})
        root = "metadata/instance" if path.startswith("metadata/instance") else "metadata/loadbalancer"
        error = azure_version_error(root, [query["api-version"]] if "api-version" in query else [])
        if error:
            return self.reply(400, error)
        tree = self.scenario.get("imds", {}).get("tree", {})
        node = tree.get(root)
        for part in [p for p in path[len(root):].split("/") if p]:
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                node = None
                break
        if node is None:
            return self.reply(404, {"error": "Not found"})
        if isinstance(node, (dict, list)):
            return self.reply(200, node)
        return self.reply(200, str(node), "text/plain")

    # --- Entra ID -------------------------------------------------------------

    def entra_token(self, tenant):
        config = self.scenario.get("entra", {})
        form = self.form()
        echo = config.get("echo_credentials")
        time.sleep(config.get("delay_seconds", 0))
        if form.get("grant_type") != "client_credentials":
            return self.reply(400, entra_error("unsupported_grant_type", 70003,
                                               "The app requested an unsupported grant type."))
        scope = form.get("scope", "")
        if not scope.endswith("/.default") or " " in scope.strip():
            return self.reply(400, entra_error(
                "invalid_scope", 1002012,
                f"The provided value for scope {scope} is not valid. Client credential flows must have a scope "
                "value with /.default suffixed to the resource identifier (application ID URI)."))
        clients = config.get("tenants", {}).get(tenant)
        if clients is None:
            return self.reply(400, entra_error(
                "invalid_request", 90002,
                f"Tenant '{tenant}' not found. Check to make sure you have the correct tenant ID and are signing "
                "into the correct cloud."))
        client_id = form.get("client_id", "")
        client = clients.get(client_id)
        if client is None:
            return self.reply(400, entra_error(
                "unauthorized_client", 700016,
                f"Application with identifier '{client_id}' was not found in the directory '{tenant}'."))
        if "client_secret" in form:
            secret = form["client_secret"]
            if secret not in client.get("secrets", []):
                shown = f" '{secret}'" if echo else ""
                return self.reply(401, entra_error(
                    "invalid_client", 7000215,
                    f"Invalid client secret provided{shown}. Ensure the secret being sent in the request is the "
                    f"client secret value, not the client secret ID, for a secret added to app '{client_id}'."))
            kind = "secret"
        elif "client_assertion" in form:
            assertion = form["client_assertion"]
            if form.get("client_assertion_type") != JWT_BEARER:
                return self.reply(400, entra_error("invalid_request", 50027, "JWT token is invalid or malformed."))
            if assertion not in client.get("assertions", []):
                shown = f" {assertion}" if echo else ""
                return self.reply(400, entra_error(
                    "invalid_client", 700211,
                    f"No matching federated identity record found for presented assertion{shown}."))
            kind = "assertion"
        else:
            return self.reply(401, entra_error(
                "invalid_client", 7000216,
                "'client_assertion', 'client_secret' or 'request' is required for the 'client_credentials' "
                "grant type."))
        lifetime = config.get("expires_in", 3599)
        token = issue(kind, lifetime, scope)
        return self.reply(200, {"token_type": "Bearer", "expires_in": lifetime, "ext_expires_in": lifetime,
                                "access_token": token})

    def accept_assertion(self, query):
        tenant, client_id = query.get("tenant", ""), query.get("client_id", "")
        length = int(self.headers.get("Content-Length") or 0)
        token = self.rfile.read(min(length, 1 << 20)).decode(errors="replace").strip()
        if not tenant or not client_id or not token:
            return self.reply(400, {"error": "tenant, client_id and a token in the body are required"})
        with LOCK:
            tenants = self.scenario.setdefault("entra", {}).setdefault("tenants", {})
            client = tenants.setdefault(tenant, {}).setdefault(client_id, {})
            client.setdefault("assertions", []).append(token)
        return self.reply(200, {})

    # --- ARM ------------------------------------------------------------------

    def arm_disk(self, path, query):
        parts = path.strip("/").split("/")
        keywords = [(0, "subscriptions"), (2, "resourcegroups"), (4, "providers"),
                    (5, "microsoft.compute"), (6, "disks")]
        if len(parts) != 8 or any(parts[i].lower() != word for i, word in keywords):
            return self.reply(404, arm_error("InvalidResourceType", f"no such resource type at {path}"))
        subscription, group, name = parts[1], parts[3], parts[7]
        refusal = self.api_version_refusal(query, DISKS_VERSIONS)
        if refusal:
            return self.reply(400, refusal)
        refusal = self.arm_auth()
        if refusal:
            return self.reply(*refusal)
        config = self.scenario.get("arm", {})
        if subscription in config.get("denied_subscriptions", []):
            scope = f"/subscriptions/{subscription}/resourceGroups/{group}/providers/Microsoft.Compute/disks/{name}"
            return self.reply(403, arm_error(
                "AuthorizationFailed",
                "The client '00000000-0000-0000-0000-00000000a11e' with object id "
                "'00000000-0000-0000-0000-00000000a11e' does not have authorization to perform action "
                f"'Microsoft.Compute/disks/read' over scope '{scope}' or the scope is invalid. If access was "
                "recently granted, please refresh your credentials."))
        disks = [d for d in config.get("disks", [])
                 if d.get("subscription", "").lower() == subscription.lower()
                 and d.get("resourceGroup", "").lower() == group.lower()]
        if not disks:
            return self.reply(404, arm_error("ResourceGroupNotFound", f"Resource group '{group}' could not be found."))
        for disk in disks:
            if disk.get("name", "").lower() == name.lower():
                time.sleep(disk.get("delay_seconds", 0))
                return self.reply(200, self.disk(subscription, group, disk))
        return self.reply(404, arm_error(
            "ResourceNotFound",
            f"The Resource 'Microsoft.Compute/disks/{name}' under resource group '{group}' was not found. For "
            "more details please go to https://aka.ms/ARMResourceNotFoundFix"))

    @staticmethod
    def api_version_refusal(query, published, resource_type="disks"):
        """ARM's refusal of a missing, malformed or unpublished api-version, or None."""
        version = query.get("api-version", "")
        if not version:
            return arm_error("MissingApiVersionParameter",
                             "The api-version query parameter (?api-version=) is required for all requests.")
        supported = ", ".join(published)
        if not API_VERSION_FORMAT.fullmatch(version):
            return arm_error("InvalidApiVersionParameter",
                             f"The api-version '{version}' is invalid. The supported versions are '{supported}'.")
        if version not in published:
            return arm_error(
                "NoRegisteredProviderFound",
                f"No registered resource provider found for location 'eastus' and API version '{version}' for "
                f"type '{resource_type}'. The supported api-versions are '{supported}'.")
        return None

    def metadata_endpoints(self, query):
        clouds = self.scenario.get("arm", {}).get("metadata_endpoints", [])
        if query.get("api-version") == LEGACY_METADATA_ENDPOINTS_VERSION:
            legacy = dict(clouds[0]) if clouds else {}
            legacy.pop("name", None)
            return self.reply(200, legacy)
        refusal = self.api_version_refusal(query, METADATA_ENDPOINTS_VERSIONS + [LEGACY_METADATA_ENDPOINTS_VERSION])
        if refusal:
            # ARM's own refusal of an unknown version of this endpoint is not
            # documented: InvalidApiVersionParameter, as for a malformed one.
            refusal["error"]["code"] = "InvalidApiVersionParameter"
            return self.reply(400, refusal)
        return self.reply(200, clouds)

    def arm_auth(self):
        """(status, body) refusing an ARM request's credentials, or None."""
        token = self.bearer()
        if token is None:
            return 401, arm_error("AuthenticationFailed", "Authentication failed. The 'Authorization' header is missing.")
        expires, audience = token
        if expires == 0:
            return 401, arm_error("InvalidAuthenticationToken", "The access token is invalid.")
        if expires < time.time():
            now = datetime.now(timezone.utc)
            return 401, arm_error(
                "ExpiredAuthenticationToken",
                f"The access token expiry UTC time is earlier than current UTC time '{now:%m/%d/%Y %H:%M:%S}'.")
        if audience not in ARM_AUDIENCES:
            return 401, arm_error(
                "InvalidAuthenticationTokenAudience",
                f"The access token has been obtained for wrong audience or resource '{audience}'. It should "
                "exactly match with one of the allowed audiences 'https://management.core.windows.net/',"
                "'https://management.core.windows.net','https://management.azure.com/','https://management.azure.com'.")
        return None

    @staticmethod
    def disk(subscription, group, disk):
        name = disk["name"]
        sku = disk.get("sku", "Premium_LRS")
        answer = {"name": name, "type": "Microsoft.Compute/disks", "location": disk["location"],
                  "id": f"/subscriptions/{subscription}/resourceGroups/{group}/providers/Microsoft.Compute/disks/{name}",
                  "sku": {"name": sku, "tier": sku.split("_")[0]},
                  "properties": {"diskSizeGB": disk.get("sizeGb", 32), "diskState": "Unattached",
                                 "provisioningState": "Succeeded",
                                 "creationData": {"createOption": "Empty"}}}
        if disk.get("zones"):
            answer["zones"] = disk["zones"]
        return answer

    # --- ACR ------------------------------------------------------------------

    def host(self):
        return self.headers.get("Host", "")

    def acr_challenge(self):
        config = self.scenario.get("acr", {})
        status = config.get("challenge_status", 401)
        if status != 401:
            return self.reply(status, "{}")
        realm_host = config.get("realm_host") or self.host()
        scheme = config.get("realm_scheme", "http")
        challenge = config.get("www_authenticate") or \
            f'Bearer realm="{scheme}://{realm_host}/oauth2/token",service="{self.host()}"'
        return self.reply(401, acr_error("UNAUTHORIZED", "authentication required, visit "
                                         "https://aka.ms/acr/authorization for more information."),
                          headers=[("Www-Authenticate", challenge)])

    def acr_exchange(self):
        config = self.scenario.get("acr", {})
        form = self.form()
        grant = form.get("grant_type", "")
        self.count(f"exchange grant_type={grant}")
        if grant not in ("access_token", "access_token_refresh_token"):
            return self.reply(400, acr_error("UNSUPPORTED", f"grant_type {grant!r} is not supported"))
        if form.get("service") != self.host():
            return self.reply(400, acr_error("UNAUTHORIZED", "service does not match this registry"))
        if form.get("tenant") != config.get("tenant"):
            return self.reply(401, acr_error("UNAUTHORIZED", "the access token is not for this registry's tenant"))
        access = form.get("access_token", "")
        if grant == "access_token_refresh_token" and form.get("refresh_token") != access:
            return self.reply(400, acr_error("UNAUTHORIZED", "refresh_token must repeat access_token"))
        with LOCK:
            expires, audience = ISSUED.get(access, (0, ""))
        if expires < time.time() or audience not in ARM_AUDIENCES | {ACR_AUDIENCE}:
            shown = f" {access}" if config.get("echo_access_token") else ""
            return self.reply(401, acr_error("UNAUTHORIZED", f"the access token{shown} is invalid or expired"))
        now = int(time.time())
        lifetime = config.get("refresh_token_lifetime", 10800)
        with LOCK:
            SERIAL["acr"] += 1
            serial = SERIAL["acr"]
        claims = {"jti": str(uuid.uuid4()), "sub": f"exchange-{serial}", "nbf": now, "exp": now + lifetime,
                  "iat": now, "iss": "Azure Container Registry", "aud": self.host(), "version": "1.0",
                  "grant_type": "refresh_token", "tenant": form["tenant"]}
        token = f"{b64url({'alg': 'RS256', 'typ': 'JWT'})}.{b64url(claims)}.fake-signature-{serial}"
        return self.reply(200, {"refresh_token": token})


def main():
    serve(Handler)


if __name__ == "__main__":
    main()
