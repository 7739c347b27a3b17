"""kafka-python logs every request and response at DEBUG with its bodies: a SASL password in
``SaslAuthenticateRequest(auth_bytes=...)``, record batches in its ``Send:`` / ``Recv:`` lines.
pykbatch logs neither record bytes nor secrets unless asked, so a filter on those loggers drops
their DEBUG records (and any record carrying SASL bytes) unless ``PYKBATCH_LOG_WIRE=1`` asks for
the wire's bodies, for debugging a protocol problem on a test cluster."""
from __future__ import annotations

import logging
import os

WIRE_LOGGERS = ("kafka.protocol.parser", "kafka.net.connection", "kafka.net.transport", "kafka.net.manager",
                "kafka.cluster")
ASKED = "PYKBATCH_LOG_WIRE"


class NoWireBodies(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if os.environ.get(ASKED) == "1":
            return True
        if record.levelno <= logging.DEBUG:
            return False
        text = record.getMessage()
        return "auth_bytes" not in text and "Sasl" not in text or "failed" in text.lower()


_FILTER = NoWireBodies()


def guard() -> None:
    """Puts the filter on kafka-python's wire loggers (once)."""
    for name in WIRE_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
