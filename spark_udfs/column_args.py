"""A Spark function's column argument: a Column, or a column's name."""


def as_column(col):
    from pyspark.sql.functions import col as to_col
    return to_col(col) if isinstance(col, str) else col
