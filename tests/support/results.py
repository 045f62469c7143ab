"""Tool results as the tests hand them to both engines: OpenClaw's text result, and a body inside
the external-content wrapper its web tools put around fetched text."""
from __future__ import annotations


def wrapped(body: str, wrapper_id: str, closing_id: str | None = None) -> str:
    """`body` between an opening wrapper of `wrapper_id` and a closing one of `closing_id` (the
    same id unless given: a different one is a forged or broken pair)."""
    closing_id = wrapper_id if closing_id is None else closing_id
    return (f'<<<EXTERNAL_UNTRUSTED_CONTENT id="{wrapper_id}">>>\nSource: Web Fetch\n---\n{body}\n'
            f'<<<END_EXTERNAL_UNTRUSTED_CONTENT id="{closing_id}">>>')


def text_result(text: str) -> dict:
    """A tool result of one text block, as OpenClaw's tools return one."""
    return {"content": [{"type": "text", "text": text}], "details": {}}
