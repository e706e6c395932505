"""Schema formats (Avro, JSON Schema, Protobuf): parsing, normalization and compatibility.

The registry core knows formats only through `SchemaFormat` and `ParsedSchema`, so each
format's rules live in one module of this package (`avro.py`, `json_schema.py`,
`protobuf.py`) and `catalog.FORMATS` maps Confluent's `schemaType` names to them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


class InvalidSchemaError(ValueError):
    """A schema that does not parse, or names a reference it was not given (Confluent 42201)."""


class ParsedSchema(Protocol):
    """One parsed schema; immutable."""

    @property
    def schema_type(self) -> str:
        """Confluent's name of the format: AVRO, JSON or PROTOBUF."""
        ...

    def canonical(self) -> str:
        """The schema's text in the format's canonical form, used to find a schema again."""
        ...

    def normalized(self) -> str:
        """The text registered with `normalize=true` (Confluent's normalization rules)."""
        ...

    def read_errors(self, writer: ParsedSchema) -> list[str]:
        """Why data written with `writer` cannot be read with this schema; [] if it can.

        BACKWARD checks the new schema as reader of the old ones, FORWARD the old as readers
        of the new, FULL both: one direction is enough to express every level.
        """
        ...


class SchemaFormat(Protocol):
    """A schema format: parses the text a client registers."""

    name: str

    def parse(self, text: str, references: Mapping[str, str]) -> ParsedSchema:
        """Parse `text`; `references` maps each reference's name to its schema text.

        Raises InvalidSchemaError on anything that is not a valid schema of this format.
        """
        ...
