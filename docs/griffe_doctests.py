"""Show the docstrings' doctests as Python console code in the API reference.

The package's docstrings carry their examples as bare doctests (`>>> call(...)` and the
output below it), not under an `Examples:` heading, so Markdown would read them as prose:
`>>>` as nested quotes and an output such as `['word', 'mixed']` as a link. This Griffe
extension fences each doctest block (prompt lines and their output, up to a blank line) as
`pycon` before the docstring is parsed. It changes only what the reference shows; pytest runs
the doctests from the source.
"""

from __future__ import annotations

import re

import griffe

_PROMPT = re.compile(r"^(\s*)>>> ")


def fence_doctests(text: str) -> str:
    """Wrap every doctest block of `text` in a ```` ```pycon ```` fence at its indentation.

    >>> fence_doctests("Sum.\\n\\n>>> 1 + 1\\n2\\n\\nDone.").splitlines()
    ['Sum.', '', '```pycon', '>>> 1 + 1', '2', '```', '', 'Done.']
    """
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        prompt = _PROMPT.match(lines[i])
        if not prompt:
            out.append(lines[i])
            i += 1
            continue
        indent = prompt.group(1)
        out.append(f"{indent}```pycon")
        # a block ends at a blank line or where the indentation drops below its prompt's
        while i < len(lines) and lines[i].strip() and lines[i].startswith(indent):
            out.append(lines[i])
            i += 1
        out.append(f"{indent}```")
    return "\n".join(out)


class DoctestFences(griffe.Extension):
    """Fences the doctests of every docstring Griffe loads (see the module docstring)."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: object) -> None:
        if obj.docstring is not None and ">>> " in obj.docstring.value:
            obj.docstring.value = fence_doctests(obj.docstring.value)
