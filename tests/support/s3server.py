"""A real S3-compatible server for the tests: moto's server mode (`python -m moto.server`, from the
moto[server] wheel) as a process on 127.0.0.1 and a free port.

With `auth=True` it checks signatures as S3 does: an IAM user with an access key and a policy that
allows s3:* is made while the server still takes any request, then /moto-api/reset-auth turns
authentication on, so a wrong secret is refused (SignatureDoesNotMatch) and an unknown key id too
(InvalidAccessKeyId). With `auth=False` it takes unsigned requests (a public bucket)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import httpx

from benchmarks import wait_started
from tests.support.processes import free_port

REGION = "us-east-1"
_POLICY = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}


@dataclass
class S3Server:
    url: str
    process: subprocess.Popen
    log: Path
    access_key_id: str | None = None
    secret: str | None = None

    def client(self, secret: str | None = None) -> Any:
        """A boto3 client of this server, signed with its key (or unsigned without auth)."""
        import boto3
        from botocore import UNSIGNED
        from botocore.config import Config

        if self.access_key_id is None:
            return boto3.client("s3", endpoint_url=self.url, region_name=REGION,
                                config=Config(signature_version=UNSIGNED))
        return boto3.client("s3", endpoint_url=self.url, region_name=REGION,
                            aws_access_key_id=self.access_key_id, aws_secret_access_key=secret or self.secret)


def _wait_up(url: str, proc: subprocess.Popen, log: Path, seconds: float = 60.0) -> None:
    wait_started(proc, lambda: httpx.get(f"{url}/moto-api/", timeout=2).status_code < 500, "moto_server",
                 seconds, lambda: log.read_text(errors="replace"), (httpx.TransportError,), every=0.1)


def _turn_auth_on(server: S3Server) -> None:
    import boto3

    # Before reset-auth moto takes any key, so these calls need none of their own.
    iam = boto3.client("iam", endpoint_url=server.url, region_name=REGION, aws_access_key_id="setup",
                       aws_secret_access_key="setup")
    iam.create_user(UserName="rag-sync")
    iam.put_user_policy(UserName="rag-sync", PolicyName="s3-all", PolicyDocument=json.dumps(_POLICY))
    key = iam.create_access_key(UserName="rag-sync")["AccessKey"]
    server.access_key_id, server.secret = key["AccessKeyId"], key["SecretAccessKey"]
    httpx.post(f"{server.url}/moto-api/reset-auth", content=b"0", timeout=10).raise_for_status()


def start_s3_server(auth: bool = True) -> S3Server:
    """Start moto_server on 127.0.0.1; returns once it answers (and, with auth, checks signatures)."""
    port = free_port()
    log = Path(tempfile.mkstemp(prefix="moto-", suffix=".log")[1])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MOTO_", "INITIAL_NO_AUTH"))}
    with log.open("wb") as out:
        # `python -m moto.server` of this interpreter: a `moto_server` on PATH may be another install's.
        proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], stdout=out,
                                stderr=subprocess.STDOUT, env=env)
    server = S3Server(url=f"http://127.0.0.1:{port}", process=proc, log=log)
    try:
        _wait_up(server.url, proc, log)
        if auth:
            _turn_auth_on(server)
    except BaseException:
        stop_s3_server(server)
        raise
    return server


def stop_s3_server(server: S3Server) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait(timeout=30)
    server.log.unlink(missing_ok=True)


@contextmanager
def s3_server(auth: bool = True) -> Iterator[S3Server]:
    """A started server, stopped however the block ends."""
    server = start_s3_server(auth=auth)
    try:
        yield server
    finally:
        stop_s3_server(server)
