"""Moved to ``pykbatch.log.audit`` (the log-files layer); this import path keeps working."""
from pykbatch.log.audit import PartitionAudit, SegmentAudit, audit_partition  # noqa: F401
