"""A real S3-compatible HTTP endpoint on loopback: moto's server mode (``moto[server]``), started
by the ``s3_server`` fixture (tests/conftest.py) and read through s3fs, as a user's bucket is."""
from __future__ import annotations

import os
from pathlib import Path

from tests.kafka_tools import free_port, wait_for_port

KEY = SECRET = "testing"  # moto accepts any credentials; these never leave loopback


def unavailable() -> str | None:
    for module, package in (("moto.server", "moto[server]"), ("s3fs", "s3fs"), ("boto3", "boto3")):
        try:
            __import__(module)
        except ImportError:
            return f"{package} is not installed (pip install -e '.[test]')"
    return None


class S3Server:
    """moto's S3 server in its own process (as a real endpoint is: it does not share this
    interpreter's GIL with the reader under test), on a free loopback port."""

    def __init__(self):
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.process = None

    def start(self, timeout: float = 30) -> None:
        import subprocess
        import sys
        self.process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not wait_for_port(self.process, self.port, timeout):
            self.stop()
            raise RuntimeError("moto's S3 server did not start (or exited)")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(30)
            self.process = None

    def client(self):
        import boto3
        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=KEY, aws_secret_access_key=SECRET,
                            region_name="us-east-1")

    def storage_options(self) -> dict:
        """fsspec/s3fs options for this endpoint."""
        return {"key": KEY, "secret": SECRET, "client_kwargs": {"endpoint_url": self.endpoint,
                                                                "region_name": "us-east-1"}}

    def upload(self, directory: Path, bucket: str, prefix: str) -> str:
        """Every file under ``directory`` into ``s3://bucket/prefix/...``; returns that URL."""
        client = self.client()
        try:
            client.create_bucket(Bucket=bucket)
        except client.exceptions.BucketAlreadyOwnedByYou:
            pass
        for path in sorted(directory.rglob("*")):
            if path.is_file():
                client.upload_file(str(path), bucket, f"{prefix}/{path.relative_to(directory).as_posix()}")
        return f"s3://{bucket}/{prefix}"


def fresh_s3fs_cache() -> None:
    """s3fs caches listings per instance; tests that rewrite a bucket clear them."""
    import s3fs
    s3fs.S3FileSystem.clear_instance_cache()
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
