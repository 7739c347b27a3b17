"""Moved to ``pykbatch.log.export`` (the log-files layer); this import path keeps working."""
from pykbatch.log.export import FORMATS, ExportReport, export_partition, export_segment  # noqa: F401
