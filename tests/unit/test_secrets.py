"""Secret values are masked wherever ferry prints or logs them; Spark is told which keys hide."""

from __future__ import annotations

import io
import logging
import re

import pytest

from ferry.secrets import (
    SPARK_OPTIONS_REDACTION_REGEX,
    SPARK_REDACTION_REGEX,
    RedactingStream,
    install_log_redaction,
    is_secret_key,
    redact,
    register,
)

SECRET_KEYS = [
    "sasl.password",
    "sasl.jaas.config",
    "ssl.key.password",
    "ssl.keystore.password",
    "ssl.truststore.password",
    "ssl.key.pem",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.config",
    "sasl.oauthbearer.assertion.private.key.passphrase",
    "A.producer.sasl.password",
]
PLAIN_KEYS = ["bootstrap.servers", "sasl.username", "ssl.ca.location", "security.protocol"]


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_secret_settings_are_known_by_name_to_ferry_and_to_spark(key: str) -> None:
    assert is_secret_key(key)
    # Spark masks a setting or data source option whose name (or value) matches.
    assert re.search(SPARK_REDACTION_REGEX, key)
    assert re.search(SPARK_OPTIONS_REDACTION_REGEX, key)


@pytest.mark.parametrize("key", PLAIN_KEYS)
def test_other_settings_stay_readable(key: str) -> None:
    assert not is_secret_key(key)


def test_a_registered_secret_is_hidden_in_any_text_a_stream_or_a_log_record(
    caplog: pytest.LogCaptureFixture,
) -> None:
    register("tiny")
    register("sEcReT-4411")
    register("sEcReT-4411-longer")  # masked whole, not as [hidden]-longer
    assert redact("pw=sEcReT-4411-longer; again sEcReT-4411") == "pw=[hidden]; again [hidden]"
    register("ab")  # too short to mask inside other text: every "ab" would vanish
    assert redact("abc") == "abc"

    target = io.StringIO()
    stream = RedactingStream(target)
    stream.write("error: sEcReT-4411 refused\n")
    assert target.getvalue() == "error: [hidden] refused\n"

    install_log_redaction()
    with caplog.at_level(logging.INFO, logger="ferry.test"):
        logging.getLogger("ferry.test").info("connecting with %s", "sEcReT-4411")
    assert caplog.records[-1].getMessage() == "connecting with [hidden]"
    try:
        raise ValueError("bad password sEcReT-4411")
    except ValueError:
        logging.getLogger("ferry.test").exception("failed")
    assert "sEcReT-4411" not in caplog.text and "ValueError: bad password [hidden]" in caplog.text
