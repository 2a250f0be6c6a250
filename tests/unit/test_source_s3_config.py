"""The S3 connector's settings and what it decides before any request: names, endpoints, the URL
template, the pairing of access key id and secret, the skip reasons (no server needed)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from rag.sources.base import SourceUnavailable, SyncContext
from rag.sources.s3 import S3Config, S3Connector, skip_reason


def make(**settings) -> S3Config:
    return S3Config.model_validate({"bucket": "team-docs", **settings})


@pytest.mark.parametrize("name", ["ab", "Team-Docs", "team_docs", "-docs", "docs-", "a..b", "a.-b", "192.168.1.4",
                                  "xn--docs", "docs-s3alias", "d" * 64])
def test_bucket_names_follow_s3s_rules(name):
    with pytest.raises(ValidationError, match="not a bucket name"):
        make(bucket=name)


@pytest.mark.parametrize("name", ["abc", "team.docs.2024", "d" * 63, "1st-bucket"])
def test_good_bucket_names(name):
    assert make(bucket=name).bucket == name


@pytest.mark.parametrize("endpoint, why", [
    ("ftp://files.example.org", "http:// or https://"),
    ("files.example.org", "http:// or https://"),
    ("https://key:secret@files.example.org", "must not hold credentials"),
    ("https://files.example.org/?x=1", "no query"),
    ("https://files.example.org:port", "not a URL"),
])
def test_endpoints_are_http_urls_without_credentials(endpoint, why):
    with pytest.raises(ValidationError, match=why):
        make(endpoint_url=endpoint)


def test_settings_refuse_unknown_keys_bad_regions_and_templates():
    with pytest.raises(ValidationError, match="Extra inputs"):
        make(secret_access_key="x")
    with pytest.raises(ValidationError, match="region"):
        make(region="us east")
    with pytest.raises(ValidationError, match="url_template may use only"):
        make(url_template="https://x.org/{key.upper}")
    with pytest.raises(ValidationError, match="url_template may use only"):
        make(url_template="https://x.org/{secret}")
    with pytest.raises(ValidationError, match="http:// or https://"):
        make(url_template="file:///{key}")
    with pytest.raises(ValidationError, match="allow_hosts"):
        make(allow_hosts=["http://127.0.0.1/"])


def test_the_default_link_is_the_objects_url():
    aws = S3Connector(make(region="eu-west-3"), SyncContext(source_name="s", workspace="default"))
    assert aws.url("q1/report 1.pdf") == "https://s3.eu-west-3.amazonaws.com/team-docs/q1/report%201.pdf"
    minio = S3Connector(make(endpoint_url="https://minio.example.org:9000/"),
                        SyncContext(source_name="s", workspace="default"))
    assert minio.url("a.md") == "https://minio.example.org:9000/team-docs/a.md"
    console = make(url_template="https://console.example.org/browse/{bucket}/{key}?region={region}")
    assert S3Connector(console, SyncContext(source_name="s", workspace="default")).url("a/b.md") == (
        "https://console.example.org/browse/team-docs/a/b.md?region=us-east-1")


def test_an_access_key_id_and_a_secret_go_together():
    with pytest.raises(SourceUnavailable, match="sets access_key_id but names no secret"):
        S3Connector(make(access_key_id="AKIAEXAMPLE"), SyncContext(source_name="s", workspace="default")).items()
    with pytest.raises(SourceUnavailable, match="names a secret but sets no access_key_id") as refused:
        S3Connector(make(), SyncContext(source_name="s", workspace="default", secret="s3cr3t-value")).items()
    assert "s3cr3t-value" not in str(refused.value)


def test_skip_reasons():
    assert skip_reason("guide.md") is None and skip_reason("report.PDF") is None
    assert skip_reason("deploy.yaml") is None  # config (rag/ingest/formats/code.py)
    assert skip_reason("Makefile") == "a code or config file of a kind ingest does not read (its suffix is not in " \
        "the formats list)"
    assert skip_reason("people.csv") is None and skip_reason("people.tsv") is None  # read as sheets
    assert skip_reason("scan.jpg") is None  # a bucket may hold scans: read by OCR
    assert skip_reason("diagram.svg") == "the .svg format is not read by this service"
    assert skip_reason("LICENSE") == "a file without a suffix: its format is unknown"
