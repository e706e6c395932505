"""docs/configuration.md is generated from the config definitions and must be current."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from moldau.config.catalog import BROKER_CATALOG
from moldau.config.topic import TOPIC_CONFIGS

SCRIPT = Path(__file__).resolve().parents[3] / "scripts/write_config_reference.py"


def _render() -> str:
    spec = importlib.util.spec_from_file_location("write_config_reference", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text: str = module.render()
    return text


def test_configuration_reference_is_up_to_date() -> None:
    written = (SCRIPT.parents[1] / "docs/configuration.md").read_text()
    assert written == _render(), (
        "docs/configuration.md is out of date: run "
        "PYTHONPATH=src python3 scripts/write_config_reference.py"
    )


def test_every_config_has_a_row_saying_what_moldau_does() -> None:
    rows = [line for line in _render().splitlines() if line.startswith("| `")]
    assert len(rows) == len(BROKER_CATALOG) + len(TOPIC_CONFIGS)
    assert all(" acted on" in row for row in rows)
    kerberos = next(r for r in rows if r.startswith("| `sasl.kerberos.min.time.before.relogin`"))
    assert "per-broker" in kerberos and "not acted on: GSSAPI" in kerberos
