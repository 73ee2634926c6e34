#!/usr/bin/env python3
"""Records the AWS answers the aws_answers and error_bodies fuzz targets are
seeded with (fuzz/seeds.py), as moto, the suite's AWS fake, gives them.

usage: MOTO_SERVER=.cache/venv/bin/moto_server fuzz/record-aws-answers.py

Starts moto_server on 127.0.0.1 (nothing else is called), makes the calls the
suite makes (STS AssumeRoleWithWebIdentity, unsigned; ECR
GetAuthorizationToken, which moto's default mode answers without checking the
signature; the instance role's credentials of moto's IMDS) and two refusals (an ECR
repository that does not exist; an STS policy longer than STS allows),
and writes each answer's body under tests/data/fuzz/aws/. Rerun it after a
moto upgrade; the bodies are committed so that seeding needs no moto.
"""
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
OUT = os.path.join(ROOT, "tests", "data", "fuzz", "aws")
SCOPE = "Credential=AKIDEXAMPLE/20260101/us-east-1/{}/aws4_request, SignedHeaders=host, Signature=00"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(url, body=None, headers=None):
    request = urllib.request.Request(url, data=body, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def main():
    server = os.environ.get("MOTO_SERVER") or os.path.join(ROOT, ".cache", "venv", "bin", "moto_server")
    port = free_port()
    moto = subprocess.Popen([server, "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                call(base + "/moto-api/")
                break
            except OSError:
                time.sleep(0.1)
        with open(os.path.join(ROOT, "tests", "data", "azure", "federated-token.jwt")) as f:
            token = f.read().strip()
        form = {"Action": "AssumeRoleWithWebIdentity", "Version": "2011-06-15",
                "RoleArn": "arn:aws:iam::123456789012:role/fuzz", "RoleSessionName": "fuzz",
                "WebIdentityToken": token}
        sts = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "text/xml"}
        answers = {
            "sts-assume-role-with-web-identity.xml":
                call(base + "/", urllib.parse.urlencode(form).encode(), sts),
            "sts-error.xml":
                call(base + "/", urllib.parse.urlencode({"Action": "GetFederationToken", "Version": "2011-06-15",
                                                         "Name": "fuzz", "Policy": "x" * 3000}).encode(),
                     {**sts, "Authorization": "AWS4-HMAC-SHA256 " + SCOPE.format("sts")}),
            "imds-role-credentials.json":
                call(base + "/latest/meta-data/iam/security-credentials/default-role"),
        }
        for name, target, body in [
            ("ecr-get-authorization-token.json", "GetAuthorizationToken", b"{}"),
            ("ecr-error.json", "DescribeRepositories", b'{"repositoryNames": ["missing"]}'),
        ]:
            headers = {"Content-Type": "application/x-amz-json-1.1",
                       "X-Amz-Target": f"AmazonEC2ContainerRegistry_V20150921.{target}",
                       "Authorization": "AWS4-HMAC-SHA256 " + SCOPE.format("ecr")}
            answers[name] = call(base + "/", body, headers)
        os.makedirs(OUT, exist_ok=True)
        for name, (status, body) in answers.items():
            with open(os.path.join(OUT, name), "wb") as f:
                f.write(body)
            print(f"{name}: HTTP {status}, {len(body)} bytes")
    finally:
        moto.terminate()
        moto.wait()


if __name__ == "__main__":
    sys.exit(main())
