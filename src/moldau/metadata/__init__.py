"""Cluster metadata: records, the immutable image, deltas, the loader and the publisher."""
