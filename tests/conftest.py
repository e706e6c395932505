"""Settings for the whole suite."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

# Timing belongs to benchmarks: a loaded 2-core CI machine must not turn a slow example
# into a failure (hypothesis' default deadline is 200 ms per example).
settings.register_profile("moldau", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("moldau")
