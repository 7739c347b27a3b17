"""Dead letters and error policies for DataFrames of record batches, in Kafka's vocabulary:
Connect's ``errors.tolerance`` / dead-letter queue / error-context logging (KIP-298) and
Streams' CONTINUE-or-FAIL handlers (KIP-210, KIP-1059).

    good, dead = split_dead_letters(df, "value", ErrorPolicy(tolerance="all", log_enable=True))
    dead.write.parquet("s3://bucket/dlq/")      # the bytes, with their error context
    good.select(explode_records ...)
    split.metrics()                              # after an action: Connect's task error metrics

Every input row ends in exactly one place: ``good`` (it validates, or it is null), ``dead``
(``dead_letter=True``), or skipped (``dead_letter=False``): input = good + dead + skipped.
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass

from pykbatch import errors as kb_errors
from pykbatch.config import ValidationConfig
from pykbatch.policy import STAGE as STAGE, ErrorPolicy as ErrorPolicy, error_context as error_context  # named here too

log = logging.getLogger("pykbatch.errors")



class DeadLetterError(kb_errors.KafkaDataError, ValueError):
    """Raised on the driver when the policy fails the job: carries the failing batch's culprits."""

    def __init__(self, message: str, code: int, culprits: list):
        self.code = code
        super().__init__(message, None, None, culprits)


@dataclass
class Split:
    good: object
    dead: object
    observation: object

    def __iter__(self):
        return iter((self.good, self.dead))

    def metrics(self) -> dict:
        """Connect's task error metrics under the names Kafka's ErrorHandlingMetrics registers
        (available once an action ran on ``good`` or ``dead``), plus ``total-records``.  Every
        failure is a record error here (data errors are not retried), and each dead letter is one
        record for the dead-letter output (``deadletterqueue-produce-requests``)."""
        m = self.observation.get
        return {"total-records": m["total"], "total-record-failures": m["failures"],
                "total-record-errors": m["failures"], "total-records-skipped": m["skipped"],
                "deadletterqueue-produce-requests": m["dead_letters"], "total-errors-logged": m["logged"],
                "last-error-timestamp": m["last_failure"]}


def split_dead_letters(df, col: str, policy: ErrorPolicy = ErrorPolicy(), *, topic_col: str | None = None,
                       partition_col: str | None = None, offset_col: str | None = None) -> Split:
    """(good, dead) DataFrames: ``good`` keeps the rows whose batches validate (and nulls), with
    the input's columns; ``dead`` the failed rows with their bytes and an ``error_context`` struct
    (topic, partition, offset, stage, class_name, exception_class_name, exception_message,
    error_code, error_name, culprits).  Tolerance ``none`` and ``max_errors`` are checked now
    (one pass over the input), so a failing policy raises here, on the driver."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    from spark_udfs.functions import kbatch_validate
    v = "__kbatch_validation"
    checked = df.withColumn(v, kbatch_validate(col, policy.config))
    failed = F.col(v).isNotNull() & ~F.col(f"{v}.ok")
    if policy.tolerance == "none" or policy.max_errors is not None:
        _enforce(checked, failed, v, policy)
    import uuid
    observation = Observation(f"pykbatch.dead_letters.{uuid.uuid4().hex[:12]}")  # unique per micro-batch too
    dead_flag = F.when(failed, 1).otherwise(0)
    checked = checked.observe(
        observation, F.count(F.lit(1)).alias("total"), F.sum(dead_flag).alias("failures"),
        F.sum(dead_flag if not policy.dead_letter else F.lit(0)).alias("skipped"),
        F.sum(dead_flag if policy.dead_letter else F.lit(0)).alias("dead_letters"),
        F.sum(dead_flag if policy.log_enable else F.lit(0)).alias("logged"),
        F.max(F.when(failed, F.lit(int(time.time() * 1000)))).alias("last_failure"))
    good = checked.filter(~failed).drop(v)
    culprits = F.col(f"{v}.culprits")
    if topic_col and partition_col:  # Kafka's messages name the row's partition, not the config's placeholder
        placeholder = F.lit(f"topic partition {(policy.config or ValidationConfig()).topic_partition}")
        named = F.concat(F.lit("topic partition "), F.col(topic_col), F.lit("-"), F.col(partition_col).cast("string"))
        culprits = F.transform(culprits, lambda c: c.withField("message", F.replace(c["message"], placeholder, named)))
    context = F.struct(
        (F.col(topic_col) if topic_col else F.lit(None).cast("string")).alias("topic"),
        (F.col(partition_col) if partition_col else F.lit(None).cast("int")).alias("partition"),
        (F.col(offset_col) if offset_col else F.lit(None).cast("bigint")).alias("offset"),
        F.lit(STAGE).alias("stage"), F.lit("pykbatch.validate").alias("class_name"),
        F.element_at(culprits, 1).getField("code").alias("code"),
        F.col(f"{v}.error_code").alias("error_code"), F.col(f"{v}.error_name").alias("error_name"),
        F.element_at(culprits, 1).getField("message").alias("exception_message"),
        culprits.alias("culprits"))
    dead = checked.filter(failed).withColumn("error_context", context).drop(v)
    if not policy.dead_letter:  # skipped: an empty frame of the same shape, outside the observed plan
        dead = df.sparkSession.createDataFrame([], dead.schema)
    if policy.handler is not None or policy.log_enable:
        dead = _with_handler_and_log(dead, col, policy)
    return Split(good, dead, observation)


def _enforce(checked, failed, v, policy: ErrorPolicy) -> None:
    """Tolerance none: the first failure fails, with its culprits; max_errors: too many fail."""
    from pyspark.sql import functions as F
    limit = 1 if policy.tolerance == "none" else policy.max_errors + 1
    rows = checked.filter(failed).select(F.col(v)).limit(limit).collect()
    if policy.tolerance == "none" and rows:
        r = rows[0][v]
        culprits = [c.asDict() for c in r["culprits"]]
        raise DeadLetterError(f"Tolerance exceeded in error handler: a batch failed validation with "
                              f"{r['error_name']}({r['error_code']}), {r['culprit_count']} culprit(s): "
                              f"{culprits[0]['message'] if culprits else ''}", r["error_code"], culprits)
    if policy.tolerance == "all" and len(rows) > policy.max_errors:
        raise DeadLetterError(f"Tolerance exceeded in error handler: more than {policy.max_errors} batches "
                              f"failed validation", rows[-1][v]["error_code"],
                              [c.asDict() for r in rows for c in r[v]["culprits"]])


def _with_handler_and_log(dead, col: str, policy: ErrorPolicy):
    """The dead rows through the KIP-210 handler and error-context logging, on the executors."""
    handler, log_enable, include = policy.handler, policy.log_enable, policy.include_messages

    def each(batches):
        for batch in batches:
            for row in batch.to_pylist():
                ctx = row["error_context"]
                culprits = ctx["culprits"] or []
                for c in culprits if handler is not None else ():
                    why = kb_errors.ask_handler(handler, c, c["code"])
                    if why:
                        raise DeadLetterError(f"{why}: {c['message']}", c["code"], culprits)
                if log_enable:
                    log.error(json.dumps(error_context(ctx, culprits, ctx["topic"], ctx["partition"], ctx["offset"],
                                                       include_messages=include, value=row[col]), default=str))
            yield batch
    return dead.mapInArrow(each, dead.schema)
