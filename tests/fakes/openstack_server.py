#!/usr/bin/env python3
"""A fake of the OpenStack APIs the suite calls, for tests: Keystone v3's
POST /v3/auth/tokens (application credentials, passwords with a project or
trust scope, the service catalog) and Cinder v3's GET
/v3/{project_id}/volumes/{volume_id}.

Written from OpenStack's documented APIs (the Identity API v3 reference:
"Password authentication with scoped authorization", "Authenticating with
an Application Credential", the token response's X-Subject-Token header,
expires_at and catalog; the Block Storage API v3 reference: "Show a
volume's details", its microversion header OpenStack-API-Version, and the
fault bodies {"itemNotFound": {"code", "message"}}), not from any
OpenStack code. Where a documented message is unknown, the text is our
own. Python 3 standard library only. It binds 127.0.0.1 on a free port and
prints the port on its first line.

One scenario file (see tests/data/openstack/scenario.json):
  {"keystone": {"application_credentials": [{"id", "name", "secret", "user_id", "project_id"}],
                "users": [{"id", "name", "domain", "password", "projects": ["PROJECT_ID"]}],
                "projects": [{"id", "name", "domain"}],
                "trusts": [{"id", "trustee_user_id", "project_id"}],
                "catalog": [{"type": "volumev3", "name": "cinderv3",
                             "endpoints": [{"region": "RegionOne", "interface": "public",
                                            "url": "{base}/r1-public/v3/{project}"}]}],
                "expires_in": 3600, "delay_seconds": 0, "echo_credentials": false},
   "cinder": {"volumes": [{"id", "region": "RegionOne", "availability_zone": "nova" (null: none),
                           "delay_seconds"?}],
              "unauthorized_once": false},
   "tls": {"cert": "LEAF.pem", "key": "LEAF.key"}   (optional)}

Catalog URLs are templates: {base} is http://127.0.0.1:PORT, {project} the
token's project ID. Every block-storage endpoint of the catalog is served:
a request under its path (before /{project}) is Cinder of that endpoint's
region, which knows only the volumes of its region.

Modes:
  - keystone.expires_in: short-lived tokens (each answer is a new token,
    fake-token-1, -2, ...), so a refresh shows; keystone.delay_seconds
    slows each token answer.
  - keystone.echo_credentials: error messages quote the secret or password
    that was sent (as a careless server might), so that tests prove the
    client cuts it out.
  - cinder.unauthorized_once: the first token presented to Cinder is
    revoked there (401), as after a Keystone token revocation, so the
    client must authenticate again.
  - a volume's delay_seconds: Cinder answers that volume late.
  - tls: HTTPS with that certificate (the test's own CA issued it), {base}
    is https://127.0.0.1:PORT; /__requests is then reached over TLS too.

What it enforces, as the real services do:
  - Keystone: a JSON body with auth.identity.methods; application
    credentials by id, or by name with their user (id, or name and
    domain); passwords for a user by id or by name and domain; a wrong
    secret or password is 401 {"error": {"code": 401, "title":
    "Unauthorized", "message": "The request you have made requires
    authentication."}}; a project (by id, or name and domain) the user has
    no role on is 401; an unscoped password token has no catalog. The token
    is in X-Subject-Token; status 201.
  - Cinder: X-Auth-Token required, unexpired and issued by this fake (401
    in Keystone's shape, as keystonemiddleware answers); the URL's project
    must be the token's (403 forbidden); OpenStack-API-Version, when sent,
    must be "volume 3.N" (400 badRequest otherwise); an unknown volume is
    404 itemNotFound.

GET /__requests answers {"METHOD /path": count} of the requests so far (not
counting itself), plus "header OpenStack-API-Version=V" counts, so tests
can count fetches and see the microversion sent.

usage: openstack_server.py SCENARIO.json
"""
import json
import re
import ssl
import sys
import time
from collections import Counter
from datetime import datetime, timezone
from urllib.parse import unquote, urlsplit

from fakebase import LOCK, FakeHandler, Server, serve

BLOCK_STORAGE = ("block-storage", "volumev3", "volumev2", "volume", "block-store")
UNAUTHORIZED = {"error": {"code": 401, "title": "Unauthorized",
                          "message": "The request you have made requires authentication."}}

ISSUED = {}  # token -> (expires at, project id)
SERIAL = Counter()


def timestamp(at):
    return datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def unauthorized(message=None):
    if message is None:
        return UNAUTHORIZED
    return {"error": {"code": 401, "title": "Unauthorized", "message": message}}


class Handler(FakeHandler):
    protocol_version = "HTTP/1.1"

    def base(self):
        scheme = "https" if self.scenario.get("tls") else "http"
        return f"{scheme}://127.0.0.1:{self.server.server_address[1]}"

    def do_GET(self):
        path = unquote(urlsplit(self.path).path)
        if path == "/__requests":
            return self.counters()
        self.count(f"GET {path}")
        return self.cinder(path)

    def do_POST(self):
        path = unquote(urlsplit(self.path).path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(min(length, 1 << 20))
        self.count(f"POST {path}")
        if path.rstrip("/").endswith("/v3/auth/tokens"):
            return self.keystone(raw)
        return self.reply(404, {"error": {"code": 404, "title": "Not Found",
                                          "message": f"The resource could not be found: {path}"}})

    # --- Keystone -------------------------------------------------------------

    def keystone(self, raw):
        config = self.scenario.get("keystone", {})
        time.sleep(config.get("delay_seconds", 0))
        try:
            auth = json.loads(raw)["auth"]
            identity = auth["identity"]
            methods = identity["methods"]
        except (ValueError, KeyError, TypeError):
            return self.reply(400, {"error": {"code": 400, "title": "Bad Request",
                                              "message": "Expecting to find auth.identity.methods in request body."}})
        echo = config.get("echo_credentials")
        if methods == ["application_credential"]:
            found = self.application_credential(config, identity.get("application_credential") or {}, echo)
        elif methods == ["password"]:
            found = self.password(config, (identity.get("password") or {}).get("user") or {},
                                  auth.get("scope"), echo)
        else:
            return self.reply(401, unauthorized(f"Unsupported authentication methods {methods}."))
        if isinstance(found, dict):
            return self.reply(401, found)
        user_id, project_id, method = found
        lifetime = config.get("expires_in", 3600)
        now = time.time()
        with LOCK:
            SERIAL["token"] += 1
            token = f"fake-token-{SERIAL['token']}"
            ISSUED[token] = (now + lifetime, project_id)
        body = {"token": {"methods": [method], "user": {"id": user_id, "domain": {"id": "default"}},
                          "issued_at": timestamp(now), "expires_at": timestamp(now + lifetime),
                          "audit_ids": [f"audit-{SERIAL['token']}"]}}
        if project_id is not None:
            body["token"]["project"] = {"id": project_id, "domain": {"id": "default"}}
            body["token"]["catalog"] = self.catalog(project_id)
        return self.reply(201, body, headers=[("X-Subject-Token", token)])

    @staticmethod
    def find_user(config, user):
        for known in config.get("users", []):
            if user.get("id") and user["id"] == known["id"]:
                return known
            domain = user.get("domain") or {}
            if user.get("name") == known["name"] and known.get("domain") in (domain.get("id"), domain.get("name")):
                return known
        return None

    def application_credential(self, config, given, echo):
        secret = given.get("secret", "")
        for credential in config.get("application_credentials", []):
            if given.get("id"):
                match = given["id"] == credential["id"]
            else:
                user = self.find_user(config, given.get("user") or {})
                match = (given.get("name") == credential.get("name") and user is not None
                         and user["id"] == credential.get("user_id"))
            if match:
                if secret != credential["secret"]:
                    return unauthorized(f"Invalid application credential secret {secret}." if echo else None)
                return credential.get("user_id"), credential["project_id"], "application_credential"
        return unauthorized("Could not find Application Credential.")

    def password(self, config, given, scope, echo):
        user = self.find_user(config, given)
        if user is None or given.get("password") != user["password"]:
            return unauthorized(f"Invalid password {given.get('password')}." if echo else None)
        if not scope:
            return user["id"], None, "password"
        if "OS-TRUST:trust" in scope:
            trust_id = (scope["OS-TRUST:trust"] or {}).get("id")
            for trust in config.get("trusts", []):
                if trust["id"] == trust_id and trust["trustee_user_id"] == user["id"]:
                    return user["id"], trust["project_id"], "password"
            return unauthorized(f"Could not find trust: {trust_id}.")
        wanted = scope.get("project") or {}
        domain = wanted.get("domain") or {}
        for project in config.get("projects", []):
            if wanted.get("id") == project["id"] or (
                    wanted.get("name") == project["name"]
                    and project.get("domain") in (domain.get("id"), domain.get("name"))):
                if project["id"] in user.get("projects", []):
                    return user["id"], project["id"], "password"
                return unauthorized(f"User {user['id']} has no access to project {project['id']}")
        return unauthorized("Could not find project.")

    def catalog(self, project_id):
        services = []
        for service in self.scenario.get("keystone", {}).get("catalog", []):
            endpoints = []
            for n, e in enumerate(service.get("endpoints", [])):
                url = e["url"].replace("{base}", self.base()).replace("{project}", project_id)
                endpoints.append({"id": f"{service['type']}-{n}", "interface": e["interface"],
                                  "region": e["region"], "region_id": e["region"], "url": url})
            services.append({"type": service["type"], "name": service.get("name", service["type"]),
                             "id": service["type"], "endpoints": endpoints})
        return services

    # --- Cinder ---------------------------------------------------------------

    def cinder_region(self, path):
        """(region, rest of the path after the endpoint's prefix) or None."""
        for service in self.scenario.get("keystone", {}).get("catalog", []):
            if service["type"] not in BLOCK_STORAGE:
                continue
            for e in service.get("endpoints", []):
                prefix = e["url"].replace("{base}", "").split("/{project}")[0]
                if path.startswith(prefix + "/"):
                    return e["region"], path[len(prefix) + 1:]
        return None

    def cinder(self, path):
        found = self.cinder_region(path)
        match = re.fullmatch(r"([^/]+)/volumes/([^/]+)", found[1]) if found else None
        if not match:
            return self.reply(404, {"itemNotFound": {"code": 404, "message": "The resource could not be found."}})
        region, (project_id, volume_id) = found[0], match.groups()
        config = self.scenario.get("cinder", {})
        token = self.headers.get("X-Auth-Token")
        with LOCK:
            issued = ISSUED.get(token)
            if issued and config.get("unauthorized_once") and not SERIAL["revoked"]:
                SERIAL["revoked"] += 1
                del ISSUED[token]
                issued = None
        if issued is None or issued[0] < time.time():
            return self.reply(401, UNAUTHORIZED)
        if issued[1] != project_id:
            return self.reply(403, {"forbidden": {"code": 403,
                                                  "message": "Policy doesn't allow volume:get to be performed."}})
        version = self.headers.get("OpenStack-API-Version")
        if version is not None:
            self.count(f"header OpenStack-API-Version={version}")
            if not re.fullmatch(r"volume 3\.\d+", version.strip()):
                return self.reply(400, {"badRequest": {"code": 400,
                                                       "message": f"Invalid API version request: {version}"}})
        for volume in config.get("volumes", []):
            if volume["id"] == volume_id and volume.get("region", "RegionOne") == region:
                time.sleep(volume.get("delay_seconds", 0))
                return self.reply(200, {"volume": self.volume(volume, project_id)},
                                  headers=[("OpenStack-API-Version", version or "volume 3.0")])
        return self.reply(404, {"itemNotFound": {"code": 404,
                                                 "message": f"Volume {volume_id} could not be found."}})

    @staticmethod
    def volume(volume, project_id):
        return {"id": volume["id"], "name": volume.get("name", ""), "status": "available",
                "size": volume.get("size", 10), "availability_zone": volume.get("availability_zone"),
                "volume_type": "__DEFAULT__", "bootable": "false", "encrypted": False,
                "multiattach": False, "attachments": [], "metadata": {}, "description": None,
                "created_at": "2026-01-01T00:00:00.000000", "updated_at": None,
                "os-vol-tenant-attr:tenant_id": project_id, "links": []}


class TlsServer(Server):
    def handle_error(self, request, client_address):
        # A client refusing the certificate (a test of exactly that) is no news.
        if not isinstance(sys.exc_info()[1], (ssl.SSLError, ConnectionError)):
            super().handle_error(request, client_address)


def with_tls(server):
    tls = Handler.scenario.get("tls")
    if tls:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(tls["cert"], tls["key"])
        # The handshake happens in each request's thread, not in accept().
        server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)


def main():
    serve(Handler, TlsServer, with_tls)


if __name__ == "__main__":
    main()
