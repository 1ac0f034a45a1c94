"""Pure parts of the outbox: signatures, reply validation, channel config (Retry-After:
test_retry_after.py)."""

from __future__ import annotations

from typing import Any

import pytest

from gochatd.errors import InvalidReply, NonRetryable
from gochatd.outbox.channels import parse_channels
from gochatd.outbox.reply import MAX_BODY_BYTES, make_reply
from gochatd.signing import sign, signature, verify

SECRET = b"k3y"


def test_signature_is_hmac_sha256_over_timestamp_and_body() -> None:
    import hashlib
    import hmac

    body = b'{"id":1}'
    header = sign(SECRET, body, timestamp=1_700_000_000)
    expected = hmac.new(SECRET, b"1700000000." + body, hashlib.sha256).hexdigest()
    assert header == f"t=1700000000,v1={expected}"
    assert signature(SECRET, body, 1_700_000_000) == expected
    assert verify(SECRET, body, header, now=1_700_000_100)


@pytest.mark.parametrize("change", ["body", "secret", "old", "garbage", "empty"])
def test_signature_rejects_tampering_and_replays(change: str) -> None:
    body = b'{"id":1}'
    header = sign(SECRET, body, timestamp=1_700_000_000)
    now = 1_700_000_010.0
    if change == "body":
        assert not verify(SECRET, b'{"id":2}', header, now=now)
    elif change == "secret":
        assert not verify(b"other", body, header, now=now)
    elif change == "old":
        assert not verify(SECRET, body, header, now=now + 3600)
    elif change == "garbage":
        assert not verify(SECRET, body, "t=abc,v1=zz", now=now)
    else:
        assert not verify(SECRET, body, "", now=now)


def test_reply_is_validated_and_copied() -> None:
    body: dict[str, Any] = {"text": "hi", "n": [1]}
    reply = make_reply(channel="wa", to="+1555", body=body, dedupe_key="conv:1:msg:2")
    body["text"] = "changed later"
    assert reply.body == {"text": "hi", "n": [1]}
    assert (reply.channel, reply.recipient, reply.dedupe_key) == ("wa", "+1555", "conv:1:msg:2")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"channel": ""}, "channel must not be empty"),
    ({"channel": 5}, "channel must be a string"),
    ({"dedupe_key": ""}, "dedupe_key must not be empty"),
    ({"dedupe_key": "k" * 401}, "dedupe_key is longer"),
    ({"dedupe_key": "caf\u00e9"}, "printable ASCII"),
    ({"dedupe_key": "a\nb"}, "printable ASCII"),
    ({"to": None}, r"recipient \(to\) must be a string"),
    ({"body": [1]}, "must be a JSON object"),
    ({"body": {"x": float("nan")}}, "not JSON-serialisable"),
    ({"body": {"x": {1, 2}}}, "not JSON-serialisable"),
    ({"body": {"x": "\x00"}}, "NUL"),
    ({"body": {"x": "\ud800"}}, "not valid Unicode"),
    ({"body": {"x": "y" * MAX_BODY_BYTES}}, "the limit is"),
])
def test_bad_replies_are_refused_clearly(kwargs: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"channel": "wa", "to": "x", "body": {"a": 1}, "dedupe_key": "k",
                            **kwargs}
    with pytest.raises(InvalidReply, match=message) as info:
        make_reply(**args)
    assert isinstance(info.value, NonRetryable) and isinstance(info.value, ValueError)


def test_channels_parse_from_yaml_mapping_or_json() -> None:
    parsed = parse_channels({"wa": {"url": "https://hooks.example/wa", "secret_env": "WA_KEY",
                                    "timeout_s": 5, "retry_base_s": 2}})
    wa = parsed["wa"]
    assert (wa.provider, wa.url, wa.secret_env, wa.timeout_s) == (
        "webhook", "https://hooks.example/wa", "WA_KEY", 5.0)
    assert (wa.retry_base_s, wa.retry_cap_s) == (2.0, 300.0)
    assert parse_channels('{"sms": {"provider": "custom", "options": {"region": "eu"}}}')[
        "sms"].options == {"region": "eu"}
    assert parse_channels("") == {} and parse_channels(None) == {}
