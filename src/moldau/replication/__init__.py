"""Replication: partition state (the high watermark), the replica manager, delayed operations."""
