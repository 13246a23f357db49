"""Matching a URI against an RFC 6570 template of simple expressions:
`{name}` takes one segment (no `/`, `?` or `#`), `{+name}` any run of
characters; values come percent-decoded. Other operators are refused when
the template is declared, naming it."""

from __future__ import annotations

import re
import urllib.parse

_EXPRESSION = re.compile(r"\{([^}]*)\}")
_NAME = re.compile(r"^[A-Za-z0-9_]+$")


class UriTemplate:
    def __init__(self, template: str) -> None:
        self.template = template
        pattern, last_end, previous_was_expression = "", 0, False
        self.variables: list[str] = []
        for match in _EXPRESSION.finditer(template):
            literal = template[last_end:match.start()]
            if previous_was_expression and not literal:
                raise ValueError(f"URI template {template!r}: two expressions need literal text between them")
            pattern += re.escape(literal)
            expression = match.group(1)
            reserved = expression.startswith("+")
            name = expression[1:] if reserved else expression
            if not _NAME.match(name):
                raise ValueError(
                    f"URI template {template!r}: {{{expression}}} is not supported; use {{name}} or {{+name}}")
            self.variables.append(name)
            pattern += f"(?P<{name}>.+?)" if reserved else f"(?P<{name}>[^/?#]+?)"
            last_end, previous_was_expression = match.end(), True
        pattern += re.escape(template[last_end:])
        self._regex = re.compile(f"^{pattern}$")

    def match(self, uri: str) -> dict[str, str] | None:
        """The variables of `uri`, percent-decoded, or None if it does not fit."""
        found = self._regex.match(uri)
        if found is None:
            return None
        return {name: urllib.parse.unquote(value) for name, value in found.groupdict().items()}
