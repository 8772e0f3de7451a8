"""The `runtimes` kind (issue 53, part 2: a fact kind in one declaration): the versions the session's
own version queries printed, folded by the ledger, stored, and rendered in the summary from the
kind's declaration alone."""

from __future__ import annotations

import json

from hypothesis import given, settings, strategies as st

from status_helpers import Chat
from worksurface.core.tokens import TokenCounter
from worksurface.ledger import Ledger
from worksurface.ledger.kinds import BY_NAME
from worksurface.summarizers.base import SummaryRequest
from worksurface.summarizers.sections import HEADINGS, IDENTIFIERS, split_sections
from worksurface.summarizers.structured import StructuredSummarizer


def _versions(messages) -> dict[str, str]:
    return {r.tool: r.version for r in Ledger.over(messages).upto().records("runtimes")}


def test_a_version_query_establishes_the_version():
    chat = Chat()
    chat.user("set up the project")
    chat.bash("python3 --version", "Python 3.11.4")
    chat.bash("node -v", "v20.11.1\n")
    chat.bash("/usr/bin/openssl version", "OpenSSL 3.6.0 1 Oct 2025")
    assert _versions(chat.messages) == {"python3": "3.11.4", "node": "20.11.1", "openssl": "3.6.0"}


def test_only_the_harness_s_own_successful_lone_query_counts():
    """A tool result is an observation: an MCP server's shell, a failed query, a compound command
    (which line answers which is a guess), `ls -v` (verbose, not a version) or a file that prints a
    version establish nothing."""
    chat = Chat()
    chat.user("check")
    chat.tool("mcp__box__bash", {"command": "python3 --version"}, "Python 9.9.9")
    chat.bash("python3 --version", "Python 3.12.0", is_error=True)
    chat.bash("python3 --version && node --version", "Python 3.12.0\nv20.0.0")
    chat.bash("ls -v", "1.2.3 notes")
    chat.bash("cat VERSION", "Python 3.99.0 is required: install it now")
    assert _versions(chat.messages) == {}


def test_the_latest_query_of_a_program_stands():
    chat = Chat()
    chat.user("upgrade")
    chat.bash("uv --version", "uv 0.4.1")
    chat.bash("uv --version", "uv 0.5.0 (Homebrew)")
    assert _versions(chat.messages) == {"uv": "0.5.0"}


_QUERIES = st.lists(st.tuples(st.sampled_from(["python3", "uv", "go", "rustc"]),
                              st.tuples(st.integers(0, 30), st.integers(0, 30)).map(lambda v: f"{v[0]}.{v[1]}")),
                    max_size=8)


@settings(max_examples=40, deadline=None)
@given(_QUERIES)
def test_the_fold_does_not_depend_on_batching(queries):
    chat = Chat()
    chat.user("go")
    for tool, version in queries:
        chat.bash(f"{tool} --version", f"{tool} {version}")
    at_once = _versions(chat.messages)
    ledger = Ledger()
    for n in range(1, len(chat.messages) + 1):
        ledger.update(chat.messages[:n])
        ledger.settle()
    assert {r.tool: r.version for r in ledger.upto().records("runtimes")} == at_once
    assert at_once == {tool: version for tool, version in queries}  # the newest of each


def test_the_versions_survive_the_store():
    chat = Chat()
    chat.user("go")
    chat.bash("go version", "go version go1.22.3 linux/amd64")
    ledger = Ledger.over(chat.messages)
    again = Ledger.from_json(json.loads(json.dumps(ledger.to_json())))
    assert [r.version for r in again.upto().records("runtimes")] == ["1.22.3"]


def test_the_summary_renders_the_kind_from_its_declaration():
    declared = BY_NAME["runtimes"].summary
    assert declared is not None and declared.section in HEADINGS
    chat = Chat()
    chat.user("set up the project")
    chat.bash("python3 --version", "Python 3.11.4")
    chat.assistant("done")
    text = StructuredSummarizer().summarize(SummaryRequest(messages=chat.messages, budget_tokens=2_000),
                                            TokenCounter()).text
    assert "python3 3.11.4" in split_sections(text)[IDENTIFIERS]
