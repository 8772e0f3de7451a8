"""The context window a Claude Code session ran in, from its own records: the model it asked for, the
1M-context beta it sent, and the sizes it reached.

Claude Code's window depends on the model and a setting the session file does not hold as such: a
model named with a `[1m]` suffix (`claude-opus-4-6[1m]`, `opus[1m]`) runs in 1M tokens, as do the models
whose native window is 1M (Opus 4.7 and later, the 5-series); any other runs in 200k. 2.1.2xx and later
name the model the user chose in each assistant record (`requestedModel`), in the `model` attachment
(`identity.modelId`), the `api-request` record (`params.betas` with the 1M beta) and the `cost-state`
totals; older versions name only the API's model (`message.model`, never suffixed). A size the session
reached above 200k (a compaction's `preTokens`, a request's measured usage) shows a larger window
whatever the records name. Only the harness's own fields count: text in a message or a tool's output
that mentions `[1m]` says nothing about the window.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# Claude Code's windows (its model table, as the pinned 2.1.328 bundle holds it: `context.window`).
DEFAULT_WINDOW = 200_000
LARGE_WINDOW = 1_000_000
# The 1M-context beta Claude Code sends for a `[1m]` model (its `long_context` beta header).
LONG_CONTEXT_BETA = "context-1m-2025-08-07"
SUFFIX_1M = re.compile(r"\[1m\]", re.IGNORECASE)
# Models whose native window is 1M in that table (every dated or suffixed id of them too).
NATIVE_1M = re.compile(r"^claude-(?:opus-4-[7-9]|opus-[5-9]|sonnet-[5-9]|haiku-[5-9]|fable-|mythos-)",
                       re.IGNORECASE)
# A model id worksurface reads as a name (Claude Code writes "<synthetic>" on its own error records).
SYNTHETIC_MODEL = "<synthetic>"


@dataclass(frozen=True)
class WindowInference:
    """The window a session ran in (None: nothing in the file says, Claude Code's 200k default holds),
    the model that says so (the last one the session named), and why, in a sentence."""

    window: int | None
    model: str | None
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"window": self.window, "model": self.model, "reason": self.reason}


@dataclass
class WindowEvidence:
    """What the records read so far say about the window (`see` each record, then `infer`)."""

    model: str | None = None           # the last model the user chose (requestedModel, modelId), else the API's
    chosen: bool = False               # `model` is the one the user chose, not the API's echo
    beta_line: int | None = None       # the line of an api-request that sent the 1M beta
    largest: int = 0                   # the largest size the session reached
    largest_line: int | None = None
    largest_what: str = ""

    def see(self, record: dict[str, Any], line: int) -> None:
        kind = record.get("type")
        if kind == "assistant":  # most records of a session: the checks below are written out inline
            model = record.get("requestedModel")
            if isinstance(model, str) and model and model != SYNTHETIC_MODEL:
                self.model, self.chosen = model, True
            body = record.get("message")
            if isinstance(body, dict):
                if not self.chosen:
                    model = body.get("model")
                    if isinstance(model, str) and model and model != SYNTHETIC_MODEL:
                        self.model = model
                usage = body.get("usage")
                if isinstance(usage, dict):
                    tokens = _context_tokens(usage)
                    if tokens is not None and tokens > self.largest:
                        self._size(tokens, line, "a request's measured usage")
        elif kind == "attachment":
            attachment = record.get("attachment")
            if isinstance(attachment, dict) and attachment.get("type") == "model":
                identity = attachment.get("identity")
                self._chosen(identity.get("modelId") if isinstance(identity, dict) else None)
        elif kind == "api-request":
            params = record.get("params")
            betas = params.get("betas") if isinstance(params, dict) else None
            if isinstance(betas, list) and LONG_CONTEXT_BETA in betas:
                self.beta_line = line
        elif kind == "system":
            for key in ("compactMetadata", "microcompactMetadata"):
                meta = record.get(key)
                if isinstance(meta, dict):
                    self._size(meta.get("preTokens"), line, f"{key}.preTokens")

    def _chosen(self, model: Any) -> None:
        if isinstance(model, str) and model and model != SYNTHETIC_MODEL:
            self.model, self.chosen = model, True

    def _api_model(self, model: Any) -> None:
        if isinstance(model, str) and model and model != SYNTHETIC_MODEL:
            self.model = model

    def _size(self, tokens: Any, line: int, what: str) -> None:
        if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens > self.largest:
            self.largest, self.largest_line, self.largest_what = tokens, line, what

    def infer(self) -> WindowInference:
        model = self.model
        if model is not None and SUFFIX_1M.search(model):
            return WindowInference(LARGE_WINDOW, model, f"the session's model {model} is the 1M-context variant")
        if model is not None and NATIVE_1M.match(model):
            return WindowInference(LARGE_WINDOW, model, f"{model} has a native 1M-token window")
        if self.beta_line is not None:
            return WindowInference(LARGE_WINDOW, model, f"its requests sent the 1M-context beta ({LONG_CONTEXT_BETA}, "
                                                        f"api-request on line {self.beta_line})")
        if self.largest > DEFAULT_WINDOW:
            return WindowInference(LARGE_WINDOW, model, f"it reached {self.largest:,} tokens ({self.largest_what}, "
                                                        f"line {self.largest_line}), over the 200k window")
        seen = f"{self.largest:,} tokens at most" if self.largest else "no size recorded"
        named = f"{model}, " if model is not None else "no model named, "
        return WindowInference(None, model, f"{named}{seen}: nothing shows more than Claude Code's 200k default")


def _context_tokens(usage: Any) -> int | None:
    """The context a request's usage measured (input, cache read and cache write tokens)."""
    if not isinstance(usage, dict):
        return None
    total = 0
    for key in _CONTEXT_KEYS:
        part = usage.get(key)
        if isinstance(part, int) and not isinstance(part, bool):
            total += part
    return total


_CONTEXT_KEYS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
