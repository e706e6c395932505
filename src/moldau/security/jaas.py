"""Kafka's JAAS configuration strings (``sasl.jaas.config``), the part Kafka reads.

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_alice="alice-secret";

One login module, a control flag and ``key=value`` options (values double- or
single-quoted, or bare words), ended by ``;``. A broker's PLAIN module lists its users as
``user_NAME="password"``; ``username``/``password`` are what this node itself presents
when it connects to others.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_HEAD = re.compile(r"\s*(?P<module>[\w.$]+)\s+(?P<flag>required|requisite|sufficient|optional)\b")
_OPTION = re.compile(
    r"""\s*(?P<key>[^\s=;]+)\s*=\s*(?:"(?P<dq>(?:[^"\\]|\\.)*)"|'(?P<sq>(?:[^'\\]|\\.)*)'|(?P<bare>[^\s;"']+))"""
)
_ESCAPE = re.compile(r"\\(.)")


class JaasError(ValueError):
    pass


@dataclass(frozen=True)
class JaasConfig:
    module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def plain_users(self) -> dict[str, str]:
        """``user_NAME="password"`` entries: the users a PLAIN listener accepts."""
        return {k[5:]: v for k, v in self.options.items() if k.startswith("user_") and k[5:]}


def parse_jaas(text: str) -> JaasConfig:
    head = _HEAD.match(text)
    if head is None:
        raise JaasError(f"expected 'LoginModule flag key=value ... ;', got {text.strip()[:60]!r}")
    options: dict[str, str] = {}
    pos = head.end()
    while True:
        m = _OPTION.match(text, pos)
        if m is None:
            break
        raw = m["dq"] if m["dq"] is not None else m["sq"] if m["sq"] is not None else m["bare"]
        options[m["key"]] = _ESCAPE.sub(r"\1", raw)
        pos = m.end()
    rest = text[pos:].strip()
    if rest != ";":
        what = "a ';'" if not rest else f"';' instead of {rest[:40]!r}"
        raise JaasError(f"sasl.jaas.config must end with {what}")
    return JaasConfig(head["module"], head["flag"], options)
