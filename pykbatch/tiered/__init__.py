"""Tiered storage (KIP-405) read offline: remote stores, their metadata, partitions as the broker
serves them.  See ``partition.py`` for the entry points.

The names below load their module on first use, so ``pykbatch`` commands that never touch a
remote store (the CLI builds its ``tiered`` sub-commands at every start) do not import it."""
import importlib

_HOMES = {
    "layouts": ("LAYOUTS", "Layout", "LocalTieredStorage", "RemoteObject", "open_store"),
    "metadata": ("TopicIdPartition", "decode_value", "records_of_segments"),
    "partition": ("NoMetadataWarning", "Piece", "Report", "TieredPartition", "TieredTopicStore"),
    "remote_log": ("Lineage", "RemotePartition", "replay"),
}
_MODULE_OF = {name: module for module, names in _HOMES.items() for name in names}
__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__():
    return __all__
