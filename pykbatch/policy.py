"""Kafka's error-handling vocabulary as one policy object, for every surface that meets bad
records: Connect's ``errors.tolerance`` / dead letters / error-context logging (KIP-298) and
Streams' CONTINUE-or-FAIL handlers (KIP-210).  The Spark dead-letter split
(``spark_udfs.dead_letters``) and the live reader (``pykbatch.live``) both take an ``ErrorPolicy``
and write the same error context; a dead-letter topic's records carry Connect's headers."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from pykbatch import errors as kb_errors
from pykbatch.config import ValidationConfig

STAGE = "VALIDATE"  # Connect's stage names the step that failed (KEY_CONVERTER, TRANSFORMATION, ...)
CLASS_NAME = "pykbatch.validate"

# Connect's dead-letter context headers (errors.deadletterqueue.context.headers.enable), UTF-8 strings
HEADER_PREFIX = "__connect.errors."
CONTEXT_HEADERS = ("topic", "partition", "offset", "connector.name", "task.id", "stage", "class.name",
                   "exception.class.name", "exception.message", "exception.stacktrace")


@dataclass(frozen=True)
class ErrorPolicy:
    """What to do with batches that fail validation.

    tolerance
        ``"none"``: the first failure fails the job, with every culprit of that batch in the
        exception (Connect's default).  ``"all"``: failures go on as dead letters (or skipped).
    max_errors
        With ``"all"``: fail anyway once more than this many batches failed (None: no limit).
    dead_letter
        True: failed rows come back in ``dead`` with their error context; False: skipped.
    handler
        KIP-210: called with each culprit of a failed batch (on the executors); answers
        ``pykbatch.errors.CONTINUE`` or ``FAIL``.  Fatal culprits never reach it: they fail.
    log_enable, include_messages
        ``errors.log.enable``: one JSON document per failure in KIP-298's error-context shape on
        the ``pykbatch.errors`` logger; the record bytes only with ``include_messages`` (off by
        default: records may hold sensitive data).
    config
        The ``ValidationConfig`` the batches are checked with.
    """
    tolerance: str = "none"
    max_errors: int | None = None
    dead_letter: bool = True
    handler: Callable | None = field(default=None, compare=False)
    log_enable: bool = False
    include_messages: bool = False
    config: ValidationConfig | None = None

    def __post_init__(self):
        if self.tolerance not in ("none", "all"):
            raise ValueError("tolerance is 'none' or 'all'")
        if self.max_errors is not None and self.max_errors < 0:
            raise ValueError("max_errors must be >= 0")


def error_context(row: dict, culprits: list, topic=None, partition=None, offset=None, *,
                  include_messages: bool = False, value=None) -> dict:
    """KIP-298's error context for one failed batch (what errors.log.enable prints)."""
    first = culprits[0] if culprits else {}
    doc = {"record": {"topic": topic, "partition": partition, "offset": offset},
           "stage": {"type": STAGE, "class": CLASS_NAME},
           "exception": {"class": kb_errors.exception_class(first.get("code")),
                         "message": first.get("message")},
           "culprits": culprits, "error_code": row.get("error_code"), "error_name": row.get("error_name")}
    if include_messages and value is not None:
        import base64
        doc["record"]["value"] = base64.b64encode(bytes(value)).decode()
    return doc


def context_headers(topic, partition, offset, code: int | None, message: str, *, task: str = "pykbatch",
                    stage: str = STAGE, class_name: str = CLASS_NAME) -> list[tuple[str, bytes]]:
    """Connect's dead-letter headers for one failure, in its order (a ``None`` field is left out)."""
    values = {"topic": topic, "partition": partition, "offset": offset, "connector.name": task,
              "task.id": "0", "stage": stage, "class.name": class_name,
              "exception.class.name": kb_errors.exception_class(code), "exception.message": message}
    return [(HEADER_PREFIX + name, str(values[name]).encode()) for name in CONTEXT_HEADERS
            if values.get(name) is not None]
