"""Tiered storage, the remote side (KIP-405): the remote storage manager interface and its
built-in `file` and `s3` implementations, the remote log metadata value types, their
`__remote_log_metadata` record formats and the per-partition metadata cache.

Nothing here imports from replication or server: the broker injects the IO.
"""
