"""Kafka's formats and protocol definitions in Python: the message-definition interpreter
(``definitions``: the one reader of Kafka's JSON definitions), Jackson's JSON as Kafka's tools print
it, the internal-topic record framing, control records, the producer-state rules, consumer
isolation and Java's modified UTF-8.  The record formats themselves live in the C core."""
