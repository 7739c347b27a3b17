"""Values (and keys) as their registered schemas say: the schema registries' wire formats,
Avro decoded natively into Arrow columns with Avro's schema resolution, a registry client, and
every value that cannot be read a ``ValueCulprit`` (its row, rule and byte).

    from pykbatch.values import decode_values
    decoded = decode_values(table, "https://registry:8081")   # or {"schema.registry.url": ...}
    decoded.values        # one Arrow column (a struct per record schema), nulls for culprits
    decoded.culprits      # [ValueCulprit(row, column, schema_id, rule, code, position, message)]
"""
from pykbatch.values.avro_schema import SchemaError
from pykbatch.values.decode import DecodedValues, ValueCulprit, decode_avro, decode_values
from pykbatch.values.glue import GlueSchemaRegistry
from pykbatch.values.registry import (
    RegisteredSchema, RegistryAuthError, RegistryError, RegistryUnavailable, SchemaMap, SchemaReference,
    SchemaRegistry,
)

__all__ = ["decode_values", "decode_avro", "DecodedValues", "ValueCulprit", "SchemaRegistry", "SchemaMap",
           "GlueSchemaRegistry",
           "RegisteredSchema", "SchemaReference", "RegistryError", "RegistryAuthError", "RegistryUnavailable",
           "SchemaError"]
