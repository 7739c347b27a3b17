"""kafka-python logs every request and response at DEBUG with its bodies: a SASL password in
``SaslAuthenticateRequest(auth_bytes=...)``, record batches in its ``Send:`` / ``Recv:`` lines.
pykbatch logs neither record bytes nor secrets unless asked: a filter on kafka-python's loggers
drops the wire loggers' DEBUG records unless ``PYKBATCH_LOG_WIRE=1`` asks for the wire's bodies
(for debugging a protocol problem on a test cluster), and in every record of every kafka-python
logger, at every level and with the wire logs on too, SASL bytes and the values of secret settings
(``hide``) are replaced before anything is written."""
from __future__ import annotations

import logging
import os
import re

WIRE_LOGGERS = ("kafka.protocol.parser", "kafka.net.connection", "kafka.net.transport", "kafka.net.manager",
                "kafka.cluster")
ASKED = "PYKBATCH_LOG_WIRE"
HIDDEN = "[hidden]"
_AUTH_BYTES = re.compile(r"""auth_bytes=b(?:'(?:\\.|[^'\\])*'|"(?:\\.|[^"\\])*")""")
_SECRETS: set[str] = set()  # the values of secret settings this process was given
_SHORTEST = 4  # a shorter value would blank out ordinary words of every line; SASL bytes go anyway


def hide(value) -> None:
    """A secret's value (a password, a JAAS line's) never to be written by a log."""
    if isinstance(value, str) and len(value) >= _SHORTEST:
        _SECRETS.add(value)


def redact(text: str) -> str:
    """``text`` with SASL exchange bytes and every hidden value replaced."""
    if "auth_bytes" in text:
        text = _AUTH_BYTES.sub(f"auth_bytes={HIDDEN}", text)
    for secret in _SECRETS:
        if secret in text:
            text = text.replace(secret, HIDDEN)
    return text


class NoSecrets(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno <= logging.DEBUG and record.name in WIRE_LOGGERS and os.environ.get(ASKED) != "1":
            return False
        text = record.getMessage()
        clean = redact(text)
        if clean != text:
            record.msg, record.args = clean, None
        return True


_FILTER = NoSecrets()


def guard() -> None:
    """Puts the filter on every kafka-python logger there is (again at each connection: a module
    imported later brings its own)."""
    names = [n for n in list(logging.Logger.manager.loggerDict) if n == "kafka" or n.startswith("kafka.")]
    for name in {*names, *WIRE_LOGGERS}:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
