"""A small reader for the shell command lines agents run: simple commands, redirections, heredocs.

It is not a shell parser; it recognises what matters for facts (which files a command reads or
writes, what a heredoc writes, a command's signature) and gives up quietly on anything else.
"""

from __future__ import annotations

import re
import shlex
from functools import lru_cache
from dataclasses import dataclass, field

# `<<EOF`, `<<'EOF'`, `<<-"EOF"`: the delimiter of a heredoc whose body follows on the next lines.
HEREDOC_RE = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][\w-]*)\1")
# Stands where `<<EOF` was, so the body goes to the simple command that opened it.
HEREDOC_MARK = "__HEREDOC__"
# Tokens that separate simple commands in a pipeline or list.
SEPARATORS = {"&&", "||", ";", "|", "&", "|&", ";;", "(", ")"}
# Redirection targets that are not files.
NON_FILES = {"/dev/null", "/dev/stdout", "/dev/stderr"}
# Fallback tokenizer for lines shlex rejects: operators, or runs of anything else.
ROUGH_TOKEN_RE = re.compile(r"&&|\|\||>>|[;|&()<>]|[^\s;|&()<>]+")
# The characters that make shlex's reading of a line more than a split: quotes and the escape.
SHLEX_QUOTING = ("'", '"', "\\")
# What shlex (posix, punctuation_chars, whitespace_split, no commenters) reads a line as, in one regex:
# runs of its punctuation characters; words of plain characters, `\x` escapes, '...' and "..." parts;
# its whitespace between. Anything else (an unclosed quote, a trailing escape) is `bad`: shlex is asked.
# shlex reads one character at a time in Python; this is the same reading in C (tests/test_facts_shortcuts.py).
LEX_RE = re.compile(r"""(?P<op>[();<>|&]+)|(?P<word>(?:[^ \t\r\n'"\\();<>|&]|\\[\s\S]|'[^']*'|"(?:[^"\\]|\\[\s\S])*")+)"""
                    r"""|[ \t\r\n]+|(?P<bad>[\s\S])""")
# The parts of one word: plain characters, an escaped character, a '...' part, a "..." part.
WORD_PART_RE = re.compile(r"[^'\"\\]+|\\([\s\S])|'([^']*)'|\"((?:[^\"\\]|\\[\s\S])*)\"")
# Inside "...", a backslash escapes only `"` and itself; before anything else it stays.
QUOTED_ESCAPE_RE = re.compile(r"\\([\s\S])")
# Wrappers that run the rest of the line as the real command.
WRAPPERS = {"sudo", "time", "env", "nohup", "command", "exec", "timeout"}
# Parsed command lines remembered: a call's new commands are read by several extractors, and a
# heredoc body can be large, so a few hundred is enough without holding a session's every write.
PARSE_CACHE_SIZE = 512


@dataclass(frozen=True)
class SimpleCommand:
    """One command of a pipeline or list: its words, files it writes (`>`/`>>`) and a heredoc body."""

    words: tuple[str, ...]
    writes: tuple[tuple[str, bool], ...] = ()  # (path, append)
    heredoc: str | None = None
    reads: tuple[str, ...] = field(default=())  # `< file` inputs

    @property
    def program(self) -> str:
        return self.words[0] if self.words else ""

    @property
    def args(self) -> tuple[str, ...]:
        return self.words[1:]


def _line_end(text: str, pos: int, plain: bool = False) -> int:
    """Index of the first newline at or after `pos` that is outside quotes (len(text) if none).
    `plain`: the text has no quote or escape character, so the first newline is that one."""
    end = text.find("\n", pos)
    if plain or end < 0:  # no quote to skip past, or no newline to find
        return end if end >= 0 else len(text)
    quote: str | None = None
    i = pos
    while i < len(text):
        ch = text[i]
        if ch == "\\" and quote != "'":
            i += 2
            continue
        if quote is None and ch in "'\"":
            quote = ch
        elif ch == quote:
            quote = None
        elif ch == "\n" and quote is None:
            return i
        i += 1
    return len(text)


def _logical_lines(command: str) -> list[tuple[str, str | None]]:
    """Command lines (a quoted string may span lines) paired with the heredoc body that follows each."""
    out: list[tuple[str, str | None]] = []
    pos = 0
    plain = _unquoted(command)
    while pos < len(command):
        end = _line_end(command, pos, plain)
        line = command[pos:end].replace("\\\n", " ")
        pos = end + 1
        m = HEREDOC_RE.search(line)
        if not m or "\n" in line:  # no heredoc, or one inside a quoted `$(...)` that carries its body
            out.append((line, None))
            continue
        body: list[str] = []
        while pos < len(command):
            nl = command.find("\n", pos)
            raw = command[pos: nl if nl >= 0 else len(command)]
            pos = nl + 1 if nl >= 0 else len(command)
            if raw.strip() == m.group(2):
                break
            body.append(raw)
        marked = f"{line[: m.start()]} {HEREDOC_MARK} {line[m.end():]}"
        out.append((marked, "\n".join(body) + ("\n" if body else "")))
    return out


def _tokens(line: str) -> list[str]:
    """Shell words and operators; unbalanced quotes (a line cut by a heredoc) fall back to a rough split."""
    lexed = _lex(line)
    if lexed is not None:
        return lexed
    try:
        return _shlex_tokens(line)
    except ValueError:
        return [t.strip("'\"") for t in ROUGH_TOKEN_RE.findall(line) if t.strip("'\"")]


def _lex(line: str) -> list[str] | None:
    """shlex's tokens of a line (see LEX_RE), or None when shlex would have to decide (it may refuse)."""
    out: list[str] = []
    for m in LEX_RE.finditer(line):
        if m.group("bad") is not None:
            return None
        word = m.group("word")
        if word is None:
            if m.group("op") is not None:
                out.append(m.group("op"))
        elif _unquoted(word):
            out.append(word)
        else:
            out.append("".join(_unquote(p) for p in WORD_PART_RE.finditer(word)))
    return out


def _unquote(part: re.Match[str]) -> str:
    escaped, single, double = part.groups()
    if escaped is not None:
        return escaped
    if single is not None:
        return single
    if double is not None:
        return QUOTED_ESCAPE_RE.sub(lambda e: e.group(1) if e.group(1) in '"\\' else e.group(0), double)
    return part.group(0)


def _unquoted(text: str) -> bool:
    """No quote or escape character in `text`."""
    return not any(c in text for c in SHLEX_QUOTING)


def _shlex_tokens(line: str) -> list[str]:
    """shlex's own reading of a line (what `_lex` gives where it answers)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    return list(lexer)


def _simple(tokens: list[str], heredoc: str | None) -> SimpleCommand | None:
    if HEREDOC_MARK in tokens:
        tokens = [t for t in tokens if t != HEREDOC_MARK]
    else:
        heredoc = None
    words: list[str] = []
    writes: list[tuple[str, bool]] = []
    reads: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok in (">", ">>", ">|", "&>", "&>>") and i + 1 < len(tokens):
            target = tokens[i + 1]
            # `2>&1` lexes as "2", ">&", "1"; a digit before ">" is a file-descriptor prefix.
            if words and words[-1].isdigit():
                words.pop()
            if target not in NON_FILES and not target.startswith("&"):
                writes.append((target, tok.startswith(">>") or tok == "&>>"))
            i += 2
            continue
        if tok in (">&", "<&"):
            if words and words[-1].isdigit():
                words.pop()
            i += 2
            continue
        if tok == "<" and i + 1 < len(tokens):
            reads.append(tokens[i + 1])
            i += 2
            continue
        words.append(tok)
        i += 1
    while words and (words[0] in WRAPPERS or re.fullmatch(r"[A-Za-z_]\w*=.*", words[0])):
        words.pop(0)
    if not words and not writes:
        return None
    return SimpleCommand(tuple(words), tuple(writes), heredoc, tuple(reads))


def simple_commands(command: str) -> list[SimpleCommand]:
    """The simple commands of a command line, in order; heredoc bodies go to the command that opens them."""
    return list(_parsed(command))


# Every fact extractor (files, identifiers, tests, tracker, errors) parses the same new commands on a
# call; remembering the last few hundred parses makes that one parse per command.
@lru_cache(maxsize=PARSE_CACHE_SIZE)
def _parsed(command: str) -> tuple[SimpleCommand, ...]:
    out: list[SimpleCommand] = []
    for line, heredoc in _logical_lines(command):
        tokens = _tokens(line)
        current: list[str] = []
        groups: list[list[str]] = []
        for tok in tokens:
            if tok in SEPARATORS:
                if current:
                    groups.append(current)
                current = []
            else:
                current.append(tok)
        if current:
            groups.append(current)
        for group in groups:
            sc = _simple(group, heredoc)
            if sc is not None:
                out.append(sc)
    return tuple(out)


def first_line(command: str) -> str:
    """The command's first non-empty line (a heredoc's body is not the command)."""
    for line in command.splitlines():
        if line.strip():
            return line.strip()
    return ""


def signature(command: str) -> str:
    """What identifies a command across retries: program and subcommand (`git push`, `mix test`),
    with `cd DIR &&` prefixes, env assignments and output plumbing dropped."""
    for sc in simple_commands(first_line(command)):
        if sc.program in ("cd", "source", ".", "export", "set"):
            continue
        words = [w for w in sc.words if not w.startswith("-")]
        if not words:
            continue
        if len(words) > 1 and re.fullmatch(r"[a-z][\w.:-]*", words[1]) and "/" not in words[1]:
            return f"{words[0]} {words[1]}"
        return words[0]
    return first_line(command)[:60]
