"""Hadoop's S3A settings (``fs.s3a.*``, what a Spark session reads ``s3a://`` with) said as
fsspec's s3fs storage options, so the tiered plan pykbatch's Python makes on the driver reaches
the store the JVM reader then reads, from the session's configuration alone.

Per-bucket settings (``fs.s3a.bucket.<bucket>.<key>``) win over the general ones, as in S3A.
What is not set is left to s3fs's own defaults, which, like S3A's default provider chain, look
at the environment and the machine's credentials.  Hadoop credential providers (JCEKS files) are
not read: give the keys as settings, or the environment.
"""
from __future__ import annotations

ANONYMOUS = "org.apache.hadoop.fs.s3a.AnonymousAWSCredentialsProvider"


def _bucket(url: str) -> str:
    return url.split("://", 1)[-1].split("/", 1)[0]


def settings_for(hadoop: dict, url: str) -> dict:
    """The ``fs.s3a.<key>`` settings that apply to url's bucket, by ``<key>``."""
    general, bucket = {}, {}
    mine = f"bucket.{_bucket(url)}."
    for key, value in hadoop.items():
        if not key.startswith("fs.s3a.") or value is None:
            continue
        name = key[len("fs.s3a."):]
        if name.startswith(mine):
            bucket[name[len(mine):]] = value
        elif not name.startswith("bucket."):
            general[name] = value
    return {**general, **bucket}


def storage_options(hadoop: dict, url: str) -> dict:
    """fsspec options (dotted keys, as kafka-segment's ``fs.*`` options are given) for url from
    the session's ``fs.s3a.*`` settings."""
    s = settings_for(hadoop, url)
    out: dict = {}
    ssl = str(s.get("connection.ssl.enabled", "true")).strip().lower() != "false"
    endpoint = str(s.get("endpoint", "")).strip()
    if endpoint:
        out["client_kwargs.endpoint_url"] = endpoint if "://" in endpoint else \
            f"{'https' if ssl else 'http'}://{endpoint}"
    if not ssl:
        out["use_ssl"] = "false"
    region = s.get("endpoint.region") or s.get("region")
    if region:
        out["client_kwargs.region_name"] = str(region).strip()
    if str(s.get("path.style.access", "false")).strip().lower() == "true":
        out["config_kwargs.s3.addressing_style"] = "path"
    for hadoop_key, fsspec_key in (("access.key", "key"), ("secret.key", "secret"), ("session.token", "token")):
        if s.get(hadoop_key):
            out[fsspec_key] = str(s[hadoop_key])
    if ANONYMOUS in str(s.get("aws.credentials.provider", "")):
        out["anon"] = "true"
    return out
