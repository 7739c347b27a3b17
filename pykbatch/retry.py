"""Transient I/O errors of object storage (timeouts, resets) retried with backoff: the one
policy for every remote read (the kafka-segment source, tiered stores)."""
from __future__ import annotations

import random
import time

# not transient: asking again gives the same answer
PERMANENT = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)


def retry_io(fn, *, attempts: int = 6, base_delay: float = 0.2, max_delay: float = 5.0, timeout: float = 60.0,
             sleep=None):
    """``fn()`` retried on transient I/O errors (``OSError``: object-storage timeouts, resets)
    with exponential backoff and full jitter, within ``timeout`` seconds in all.  Data errors
    (``ValueError``, pykbatch's KafkaDataError) and missing or forbidden objects are never
    retried: asking again cannot change them."""
    sleep = sleep or time.sleep
    deadline = time.monotonic() + timeout
    for attempt in range(attempts):
        try:
            return fn()
        except (ValueError, *PERMANENT):
            raise
        except OSError:
            delay = random.uniform(0, min(max_delay, base_delay * 2 ** attempt))
            if attempt == attempts - 1 or time.monotonic() + delay > deadline:
                raise
            sleep(delay)
