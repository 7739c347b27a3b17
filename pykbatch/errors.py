"""Exceptions and Kafka's error vocabulary.

Every exception pykbatch raises for bad data derives from ``KafkaDataError``
and from a builtin (``ValueError`` for data errors), and carries Kafka's
error ``code`` and ``name``, the byte ``offset`` (also ``position``) where the
problem was found, the stable ``rule`` id and its ``error_class``:

- ``retriable``: sending the same bytes again can succeed (CORRUPT_MESSAGE:
  bytes damaged in transit, as Kafka's producer treats it);
- ``abortable``: this batch or these records fail, the pipeline goes on
  (drop the culprits and keep the rest);
- ``fatal``: stop; retrying or dropping records cannot help.
"""
from __future__ import annotations

from typing import Iterable

from pykbatch import _catalogue
from pykbatch.rules import BY_ID as _RULES

RETRIABLE = "retriable"
ABORTABLE = "abortable"
FATAL = "fatal"

# What a pipeline does for each class (the producer's error classes, KIP-467's client side).
# For an abortable error with no record-level culprits the culprit set is the whole batch.
ACTIONS = {
    RETRIABLE: "retry the whole batch",
    ABORTABLE: "drop the culprits and keep the rest",
    FATAL: "stop",
}

# KIP-210 handler answers
CONTINUE = "CONTINUE"
FAIL = "FAIL"

# code -> (Kafka's name, error class) for every code pykbatch can report (csrc/kb_kafka_errors.def).
CODES: dict[int, tuple[str, str]] = {code: (name, cls) for name, code, cls, _, _ in _catalogue.kafka_errors()}
CODE: dict[str, int] = {name: code for code, (name, _) in CODES.items()}
"""Kafka's error code by name: ``CODE["CORRUPT_MESSAGE"] == 2``."""
EXCEPTIONS: dict[int, str] = {code: exc for _, code, _, exc, _ in _catalogue.kafka_errors() if exc}
"""The exception Kafka raises for each code (what a Java pipeline would log)."""
REFRESH, POSSIBLY_PERSISTED = "refresh", "possibly_persisted"
ERROR_ACTIONS: dict[int, frozenset[str]] = {code: frozenset(actions.split())
                                            for _, code, _, _, actions in _catalogue.kafka_errors()}
"""What a client does for each code beside its class (csrc/kb_kafka_errors.def): ``REFRESH`` the
leader or coordinator before retrying; ``POSSIBLY_PERSISTED``: the records may have landed anyway."""
if set().union(*ERROR_ACTIONS.values()) - {REFRESH, POSSIBLY_PERSISTED}:
    raise ImportError("pykbatch: csrc/kb_kafka_errors.def names an action outside refresh, possibly_persisted")
if not {cls for _, cls in CODES.values()} <= set(ACTIONS):
    raise ImportError("pykbatch: csrc/kb_kafka_errors.def names an error class outside " + ", ".join(ACTIONS))


def error_name(code: int) -> str:
    return CODES.get(code, CODES[CODE["UNKNOWN_SERVER_ERROR"]])[0]


def exception_class(code: int | None) -> str:
    """The exception class Kafka raises for a code (unknown codes and none: UnknownServerException)."""
    unknown = EXCEPTIONS[CODE["UNKNOWN_SERVER_ERROR"]]
    return unknown if code is None else EXCEPTIONS.get(code, unknown)


def classify(code: int) -> str:
    """Error class of a Kafka error code: ``retriable``, ``abortable`` or ``fatal`` (codes
    pykbatch does not know are fatal, as Kafka treats unknown errors)."""
    return CODES.get(code, CODES[CODE["UNKNOWN_SERVER_ERROR"]])[1]


def ask_handler(handler, culprit, code: int) -> str | None:
    """KIP-210 for one culprit: why to fail — a fatal ``code`` (the handler is not asked) or the
    handler's FAIL — or None when it answered CONTINUE."""
    if classify(code) == FATAL:
        return "fatal culprit, handler not asked"
    answer = handler(culprit)
    if answer == FAIL:
        return "handler answered FAIL"
    if answer != CONTINUE:
        raise ValueError(f"a handler answers CONTINUE or FAIL, not {answer!r}")
    return None


def action(code: int) -> str:
    """What a pipeline does about a Kafka error code (see ``ACTIONS``)."""
    return ACTIONS[classify(code)]


def table() -> list[dict]:
    """Every code pykbatch can report, as data: code, name, class, action."""
    return [{"code": code, "name": name, "error_class": cls, "action": ACTIONS[cls]}
            for code, (name, cls) in sorted(CODES.items()) if code != 0]


class KafkaDataError(Exception):
    """Base of pykbatch's data errors."""

    code = CODE["UNKNOWN_SERVER_ERROR"]

    def __init__(self, message: str, offset: int | None = None, rule: str | None = None,
                 culprits: Iterable = ()):
        self.message = message
        self.offset = offset
        self.rule = rule
        self.culprits = list(culprits)
        super().__init__(_describe(message, offset, rule))

    @property
    def position(self) -> int | None:
        return self.offset

    @property
    def name(self) -> str:
        return error_name(self.code)

    @property
    def error_class(self) -> str:
        return classify(self.code)

    @property
    def retriable(self) -> bool:
        return self.error_class == RETRIABLE

    def as_dict(self) -> dict:
        """The error as data: Kafka's code and name, the rule, the byte position, the message."""
        return {"code": self.code, "name": self.name, "rule": self.rule, "position": self.offset,
                "message": self.message}

    def line(self) -> str:
        """One line naming the rule, the byte position and Kafka's message (as ``pykbatch
        validate`` prints a culprit)."""
        where = f"at byte {self.offset}: " if self.offset is not None else ""
        return f"{where}{self.name}({self.code}) {self.rule or 'unknown'}: {self.message}"


def _describe(message: str, offset: int | None, rule: str | None) -> str:
    """The one format of every error message: Kafka's text, then where and which rule."""
    where = [f"rule {rule}"] if rule else []
    if offset is not None:
        where.append(f"at byte {offset}")
    return f"{message} [{', '.join(where)}]" if where else message


class CorruptRecordError(KafkaDataError, ValueError):
    """CORRUPT_MESSAGE: CRC mismatch or broken framing; retriable."""
    code = CODE["CORRUPT_MESSAGE"]


class InvalidRecordError(KafkaDataError, ValueError):
    """INVALID_RECORD: a batch or record breaks the format's rules."""
    code = CODE["INVALID_RECORD"]


class InvalidTimestampError(KafkaDataError, ValueError):
    """INVALID_TIMESTAMP."""
    code = CODE["INVALID_TIMESTAMP"]


class RecordTooLargeError(KafkaDataError, ValueError):
    """MESSAGE_TOO_LARGE."""
    code = CODE["MESSAGE_TOO_LARGE"]


class UnsupportedForMessageFormatError(KafkaDataError, ValueError):
    """UNSUPPORTED_FOR_MESSAGE_FORMAT: a message format this operation cannot handle."""
    code = CODE["UNSUPPORTED_FOR_MESSAGE_FORMAT"]


class UnsupportedCompressionTypeError(KafkaDataError, ValueError):
    """UNSUPPORTED_COMPRESSION_TYPE."""
    code = CODE["UNSUPPORTED_COMPRESSION_TYPE"]


class UnknownServerError(KafkaDataError, ValueError):
    """UNKNOWN_SERVER_ERROR: what Kafka answers for errors it does not classify.  Every one
    pykbatch raises is caused by the bytes (a payload the codec rejects, an unknown codec id, input
    the broker's own code fails on), so it is a ``ValueError`` like every other data error: code
    that handles bad data with ``except ValueError`` handles these batches too."""
    code = CODE["UNKNOWN_SERVER_ERROR"]


class CulpritsError(KafkaDataError, ValueError):
    """Raised when validation is told to fail: carries every culprit seen."""

    def __init__(self, code: int, message: str, offset=None, rule=None, culprits: Iterable = ()):
        self.code = code
        super().__init__(message, offset, rule, culprits)


class UnrepairableError(KafkaDataError, ValueError):
    """``drop_culprits`` met batch-level culprits, which dropping records cannot cure (a CRC
    mismatch, a lying count, ...).  ``batches`` lists ``(entry, culprits)``."""

    def __init__(self, batches):
        self.batches = list(batches)
        culprits = [c for _, cs in self.batches for c in cs]
        first = culprits[0]
        self.code = first.code
        listing = "; ".join(f"batch {entry}: {', '.join(sorted({c.rule for c in cs}))}" for entry, cs in self.batches)
        super().__init__(f"Batch-level culprits cannot be repaired by dropping records ({listing})",
                         first.position, first.rule, culprits)


class HandlerFailed(CulpritsError):
    """A KIP-210 handler answered FAIL (or a fatal culprit came first): carries every culprit seen."""


_BY_CODE = {cls.code: cls for cls in (CorruptRecordError, InvalidRecordError, InvalidTimestampError,
                                      RecordTooLargeError, UnsupportedForMessageFormatError,
                                      UnsupportedCompressionTypeError, UnknownServerError)}


def rule_error(rule: str, position: int | None = None, /, **values) -> KafkaDataError:
    """The exception for a rule checked in Python at byte ``position``: its code and message from
    the catalogue, ``values`` filling the message's fields."""
    checked = _RULES[rule]
    return error_for(checked.code, checked.message(**values), position, rule)


def error_for(code: int, message: str, offset: int | None = None, rule: str | None = None,
              culprits: Iterable = ()) -> KafkaDataError:
    """The exception for a Kafka error code (the single translation point)."""
    cls = _BY_CODE.get(code)
    if cls is None:
        return CulpritsError(code, message, offset, rule, culprits)
    return cls(message, offset, rule, culprits)


def apply_handler(result, handler):
    """KIP-210: ask ``handler(culprit)`` about each culprit in order; it answers CONTINUE or
    FAIL.  Fatal culprits never reach it (they fail at once), and after a FAIL it is not asked
    again: ``HandlerFailed`` carries every culprit seen so far.  CONTINUEs are logged at debug
    level, so nothing is swallowed without a trace."""
    import logging
    log = logging.getLogger("pykbatch")
    seen = []
    for c in result.culprits:
        seen.append(c)
        why = ask_handler(handler, c, c.code)
        if why:
            log.error("%s: %r", why, c)
            raise HandlerFailed(c.code, c.message, c.position, c.rule, seen)
        log.debug("handler answered CONTINUE for %r", c)
    return result
