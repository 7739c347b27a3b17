"""Data files: the dump's JSON schema and Kafka's message definitions (no code)."""
