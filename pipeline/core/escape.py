"""The one escaper every rendering uses: quoted text can neither close the wrapper it sits in, open
another, pass for a harness note, nor start a section of the document quoting it.

worksurface quotes text the world wrote (a file, a rule, a test id, a todo, a skill name) inside its
own renderings: the summary, the reinjected wrappers, the status block, a sub-agent brief, the report.
A tag is caught in every spelling a model would still read as that tag: any case, spaces inside,
zero-width and other invisible characters inside (Unicode format characters), and look-alike angle
brackets, letters and dashes (fullwidth forms, `‹`, `〈`, `⟨` ...). Only the opening bracket of such a
tag changes (to `&lt;`); everything else stays byte for byte, so a file still reads as written.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterable

# The wrappers worksurface emits, and the harness's own tags a model takes for the harness's notes.
WRAPPER_TAGS = ("file", "skill", "plan", "standing-constraints", "tools-available", "agent-status",
                "task-spec", "findings", "working-state", "collapsed", "recent-results")
HARNESS_TAGS = ("system-reminder", "task-notification", "local-command-stdout", "local-command-stderr",
                "bash-stdout", "bash-stderr", "bash-input", "command-name", "command-message", "command-args",
                "user-prompt-submit-hook")
RESERVED_TAGS = WRAPPER_TAGS + HARNESS_TAGS
# Characters a model reads as `<`: the ASCII one and its look-alikes.
LESS_THAN = "<\uff1c\ufe64\u2039\u2329\u3008\u27e8\u02c2\u1438\u276e\u29fc\u227a"
# Dashes a model reads as `-` inside a tag name (NFKC leaves these alone).
_DASHES = dict.fromkeys(map(ord, "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63\uff0d\u2043"), "-")
# How far after a `<` a tag name is looked for (room for spaces and invisible characters).
_WINDOW = 64
# Unicode's format characters (category Cf: zero-width spaces and joiners, bidi controls, the BOM,
# tags ...), as of the Unicode version Python 3.11 ships; a test checks it against unicodedata.
FORMAT_CHARS = ("\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e"
                "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U00013438"
                "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f")
_FORMAT_CHARS_RE = re.compile(f"[{FORMAT_CHARS}]+")
# Where a plain ASCII match cannot decide: a look-alike bracket, or `<` whose name (spaces and `/`
# aside) runs into a non-ASCII character (an invisible one, a fullwidth letter, a look-alike dash).
_SUSPECT_RE = re.compile(r"[%s]|<(?=[ \t\r\n/]*[A-Za-z-]*[^\x00-\x7f])" % LESS_THAN[1:])
# Line breaks a renderer must not let a one-line value carry (str.splitlines breaks on all of them).
_BREAKS_RE = re.compile("\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_HEADING_RE = re.compile(r"^[ \t]{0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
_CONTROL_RE = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")


def fold(text: str) -> str:
    """`text` as a model reads it: compatibility forms unified (NFKC), invisible format characters
    dropped, look-alike dashes made `-`, case folded."""
    if text.isascii():
        return text.casefold()
    return _FORMAT_CHARS_RE.sub("", unicodedata.normalize("NFKC", text)).translate(_DASHES).casefold()


def _tags(extra: str | Iterable[str] | None) -> tuple[str, ...]:
    if extra is None:
        return RESERVED_TAGS
    more = (extra,) if isinstance(extra, str) else tuple(extra)
    return RESERVED_TAGS + tuple(t.lower() for t in more if t.lower() not in RESERVED_TAGS)


def escape_tags(text: str, extra: str | Iterable[str] | None = None) -> str:
    """`text` with the opening bracket of every reserved tag (and of `extra` tags), opening or
    closing, in any spelling a model would read as one, made `&lt;`.

    Two passes, both mostly in the regex engine: plain ASCII tags first; then only the brackets a
    plain match cannot decide (a look-alike bracket, or a name that runs into a non-ASCII character)
    are read again after folding."""
    tags = _tags(extra)
    patterns = _patterns(tags)
    if "<" in text:
        text = patterns.ascii.sub("&lt;", text)
    if text.isascii():
        return text
    out: list[str] = []
    last = 0
    for m in _SUSPECT_RE.finditer(text):
        at = m.start()
        if patterns.folded.match(fold(text[at + 1: at + 1 + _WINDOW])):
            out += [text[last:at], "&lt;"]
            last = at + 1
    if not out:
        return text
    out.append(text[last:])
    return "".join(out)


@dataclass(frozen=True)
class _Patterns:
    ascii: re.Pattern[str]    # `<` of a tag spelled in plain ASCII (any case, spaces)
    folded: re.Pattern[str]   # a tag name at the start of folded text


@lru_cache(maxsize=16)
def _patterns(tags: tuple[str, ...]) -> _Patterns:
    names = "|".join(re.escape(t) for t in sorted(tags, key=len, reverse=True))
    return _Patterns(re.compile(r"<(?=[ \t\r\n\f\v]*/?[ \t\r\n\f\v]*(?:%s)(?![\w-]))" % names, re.I),
                     re.compile(r"\s*/?\s*(?:%s)(?![\w-])" % names))


@lru_cache(maxsize=16)
def _folded_headings(headings: tuple[str, ...]) -> frozenset[str]:
    """The headings as `escape_headings` compares them (a document has a few fixed sets)."""
    return frozenset(" ".join(fold(h).split()) for h in headings if h.strip())


def escape_headings(text: str, headings: Iterable[str]) -> str:
    """`text` with every line that a reader would take for one of `headings` (a markdown heading,
    any level, in any spelling `fold` unifies) started with a backslash, so quoted text cannot open
    a section of the document that quotes it."""
    if "#" not in text and "\uff03" not in text and "\ufe5f" not in text:
        return text  # no line can be a heading: most quoted texts, found at C speed
    wanted = _folded_headings(tuple(headings))
    if not wanted:
        return text
    lines = text.split("\n")
    for n, line in enumerate(lines):
        m = _HEADING_RE.match(fold(line))
        if m and " ".join(m.group(2).split()) in wanted:
            lines[n] = "\\" + line
    return "\n".join(lines)


def inline_value(text: str) -> str:
    """A value that must stay on its line (a path, a name, an id): line breaks shown as `\\n`, other
    control characters dropped. Nothing is cut or collapsed: the whole value shows."""
    return _CONTROL_RE.sub("", _BREAKS_RE.sub("\\\\n", text))


# summarizers/ still import the old name (another area's files this session); remove once they use inline_value.
one_line = inline_value


# What a terminal would act on instead of showing: C0 controls (ESC starts colour, cursor, title and
# OSC 8 link sequences; CR returns over the line; BEL, BS, form feed ...), DEL, C1 controls (CSI and
# OSC as one byte), the line and paragraph separators, and the bidi controls that reorder what
# follows (a name that reads as another). Tab and newline are kept only where a text may span lines.
_TERMINAL_NAMES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_TERMINAL_CONTROLS = ([chr(c) for c in range(0x20)] + [chr(c) for c in range(0x7f, 0xa0)]
                      + list("\u2028\u2029\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
                             "\u2066\u2067\u2068\u2069"))


def _visible(char: str) -> str:
    code = ord(char)
    return _TERMINAL_NAMES.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


_TERMINAL_LINE = str.maketrans({c: _visible(c) for c in _TERMINAL_CONTROLS})
_TERMINAL_TEXT = str.maketrans({c: _visible(c) for c in _TERMINAL_CONTROLS if c not in "\n\t"})


def for_terminal(text: str, *, lines: bool = False) -> str:
    """`text` (a name, a path, a quoted text) as a terminal must show it: every character a terminal
    would act on (escape sequences, carriage return, C1 controls, bidi overrides) written as a
    visible escape (`\\x1b`, `\\r`, `\\u202e`); newlines and tabs kept only when `lines`."""
    return text.translate(_TERMINAL_TEXT if lines else _TERMINAL_LINE)


def escape_quoted(text: str, headings: Iterable[str] = (), tag: str | None = None) -> str:
    """Quoted text for any rendering: reserved tags (and `tag`) neutralized, and lines that would
    pass for one of `headings` of the rendering escaped."""
    return escape_headings(escape_tags(text, tag), headings)


def escape_attr(value: str) -> str:
    """A value for an attribute written in double quotes: on one line, `&`, `<`, `>` and `"` as
    entities, look-alike tag openers neutralized."""
    value = inline_value(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    return escape_tags(value)


def escape_element_text(text: str) -> str:
    """Element text in an XML-like block: `&` and `<` as entities (and `]]>`), look-alike tag openers
    neutralized."""
    return escape_tags(text.replace("&", "&amp;").replace("<", "&lt;").replace("]]>", "]]&gt;"))


def json_for_script(value: Any) -> str:
    """JSON that is safe inside an HTML `<script>` element: `<`, `>` and `&` as `\\u` escapes (still
    valid JSON for JSON.parse), so no text can close the element or open a comment in it; a number
    JSON cannot hold (NaN, infinity) is written as null."""
    text = json.dumps(_finite(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
