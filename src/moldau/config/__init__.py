"""Configuration definitions: Kafka's broker (``broker``) and topic (``topic``) keys.

They sit below every package that reads them (storage, security, server, cli), so none of
those imports upward to learn a config's name, type or default.
"""
