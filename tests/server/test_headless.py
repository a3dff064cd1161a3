"""The headless editor's document: incremental edits sent in UTF-16 positions, and its own copy
of the text kept in step with them."""
from lsprotocol import types

from spanfill.server.headless import ClientDocument


class RecordingClient:
    def __init__(self):
        self.changes = []

    def text_document_did_open(self, params):
        self.opened = params.text_document

    def text_document_did_change(self, params):
        self.changes.append((params.text_document.version, params.content_changes[0]))


def test_insert_counts_utf16_columns_and_follows_newlines():
    client = RecordingClient()
    doc = ClientDocument(client, "file:///x.py", "s = '😀'\nend")
    at = doc.position_at(len("s = '😀"))
    assert at == types.Position(0, 7)                       # the emoji is two UTF-16 units
    at = doc.insert(at, "é")
    assert at == types.Position(0, 8) and doc.lines[0] == "s = '😀é'"
    at = doc.insert(at, "\n    x")
    assert at == types.Position(1, 5) and doc.lines == ["s = '😀é", "    x'", "end"]
    assert [v for v, _ in client.changes] == [2, 3]
    assert client.changes[1][1].range == types.Range(types.Position(0, 8), types.Position(0, 8))
