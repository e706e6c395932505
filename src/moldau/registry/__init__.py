"""Schema registry: Confluent's REST API over schemas kept in a compacted topic (`_schemas`)."""
