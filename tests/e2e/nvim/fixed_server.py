"""A stand-in inline-completion server with one fixed multi-line suggestion, for the plugin's
multi-line paths (virt_lines, accept-word across a line break) that a random-weight model cannot
be relied on to produce. It answers like spanfill's typing-through cache: what the user has typed
since the anchor is taken off the front of the suggestion; a divergence gets no suggestion.

    python fixed_server.py ROW COL SUGGESTION_JSON     (anchor: 0-based line, UTF-16 column)
"""
from __future__ import annotations

import json
import sys

from lsprotocol import types
from pygls.lsp.server import LanguageServer

server = LanguageServer("fixed-suggestion", "0.1")


def offset(lines: list[str], line: int, character: int) -> int:
    return sum(len(text) for text in lines[:line]) + character


@server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
def inline_completion(ls: LanguageServer, params: types.InlineCompletionParams):
    doc = ls.workspace.get_text_document(params.text_document.uri)
    lines = doc.source.splitlines(keepends=True)
    start = offset(lines, ANCHOR[0], ANCHOR[1])
    cursor = offset(lines, params.position.line, params.position.character)
    typed = doc.source[start:cursor] if cursor >= start else None
    if typed is None or not SUGGESTION.startswith(typed) or typed == SUGGESTION:
        return types.InlineCompletionList(items=[])
    here = types.Range(params.position, params.position)
    return types.InlineCompletionList(items=[types.InlineCompletionItem(insert_text=SUGGESTION[len(typed):], range=here)])


if __name__ == "__main__":
    ANCHOR = (int(sys.argv[1]), int(sys.argv[2]))
    SUGGESTION = json.loads(sys.argv[3])
    server.start_io()
