"""Secrets stay secret: which settings are secret, and every known secret masked in text.

A password printed once (in an error, a log line, Spark's log) is a password leaked: the
console is copied into tickets, logs are shipped to other teams. So the loader registers every
secret value it reads (settings whose name says they are secret, such as `sasl.password` or
`sasl.jaas.config`, whether written in the file or read through a config provider such as
`${env:...}`), and everything the `ferry` command prints or logs goes through `redact`, which
replaces each registered value by `[hidden]`. Masking by value, not by key, also catches a
secret quoted inside someone else's message (a librdkafka error, a traceback).

No I/O; the registry is per process. Spark's Python workers register nothing: they print
nothing to the console (their stderr goes to spark.log with the JVM's), and their errors
travel to the driver, which masks them where it prints them.
"""

from __future__ import annotations

import logging
import re
import threading
import traceback
from typing import Any, TextIO

__all__ = [
    "HIDDEN",
    "SPARK_OPTIONS_REDACTION_REGEX",
    "SPARK_REDACTION_REGEX",
    "RedactingStream",
    "install_log_redaction",
    "is_secret_key",
    "redact",
    "register",
]

HIDDEN = "[hidden]"

# Setting names whose values are secret, librdkafka's and the Java clients' spellings alike:
# sasl.password, sasl.jaas.config, ssl.key.password, ssl.keystore.password, ssl.key.pem,
# sasl.oauthbearer.client.secret, sasl.oauthbearer.config (may hold a token), Java's inline
# ssl.keystore.key, a schema registry's basic.auth.user.info (`user:password`), ...
_SECRET_KEY = re.compile(
    r"password|passphrase|secret|jaas|token|credential|key\.pem|private\.key|keystore\.key|"
    r"oauthbearer\.config|user\.info",
    re.IGNORECASE,
)
# Spark masks a setting or data source option (in its log, event log and UI) when its name or
# its value matches this; Spark's default misses sasl.jaas.config and ssl.key.pem.
SPARK_REDACTION_REGEX = (
    r"(?i)secret|password|passphrase|token|access[.]?key|jaas|credential|key\.pem|"
    r"private\.key|keystore\.key|oauthbearer\.config|user\.info"
)
SPARK_OPTIONS_REDACTION_REGEX = r"(?i)url|" + SPARK_REDACTION_REGEX.removeprefix("(?i)")

# A secret shorter than this is not masked inside other text: "a" or "1" would mask every
# occurrence of the letter. Such a value is no secret worth the name anyway.
_MIN_LENGTH = 4

_lock = threading.Lock()
_secrets: set[str] = set()
_pattern: re.Pattern[str] | None = None


def is_secret_key(key: str) -> bool:
    """Whether a setting's value is secret, judged by its name (`A.producer.sasl.password`)."""
    return _SECRET_KEY.search(key) is not None


def register(value: str) -> None:
    """Mask `value` wherever ferry prints it from now on (in this process)."""
    global _pattern
    value = value.strip()
    if len(value) < _MIN_LENGTH:
        return
    with _lock:
        if value in _secrets:
            return
        _secrets.add(value)
        # Longest first: a secret containing another is masked whole.
        ordered = sorted(_secrets, key=len, reverse=True)
        _pattern = re.compile("|".join(re.escape(secret) for secret in ordered))


def redact(text: str) -> str:
    """`text` with every registered secret replaced by `[hidden]`."""
    pattern = _pattern
    if pattern is None or not text:
        return text
    return pattern.sub(HIDDEN, text)


class RedactingStream:
    """A text stream (stdout, stderr) that masks every registered secret it is given."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


_installed = False


def install_log_redaction() -> None:
    """Every log record of this process (ferry's, py4j's, a library's) is masked once, when it
    is made, whatever handler later writes it."""
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
    make_record = logging.getLogRecordFactory()

    def masked_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make_record(*args, **kwargs)
        if _pattern is not None:
            try:
                message = record.getMessage()
            except Exception:  # a bad format string: the handler reports it, with msg as is
                record.msg = redact(str(record.msg))
                return record
            cleaned = redact(message)
            if cleaned != message:
                record.msg, record.args = cleaned, None
            if record.exc_info and record.exc_info[0] is not None:
                # A handler formats the traceback later, unless the text is already there.
                trace = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
                if redact(trace) != trace:
                    record.exc_text = redact(trace)
        return record

    logging.setLogRecordFactory(masked_record)
