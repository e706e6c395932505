"""Metric primitives the broker's hooks update: counters, histograms, request timers.

Plain objects low in the package graph, so storage, replication and the coordinators can
count without knowing about the exporter; :mod:`moldau.metrics` (on top, next to the
server) reads them when Prometheus scrapes.
"""
