"""Packing by value across sections, and the summary's ranking rules for finished work, command forms
and failures listed once."""

from __future__ import annotations

from builders import Convo
from worksurface import compact
from worksurface.summarizers import StructuredSummarizer, SummaryRequest
from worksurface.summarizers.packing import Item, Section, pack
from worksurface.core.tokens import TokenCounter

COUNTER = TokenCounter()


def test_room_left_by_the_shares_goes_round_the_sections_not_to_the_first_one():
    rules = Section("Rules", [Item(f"- rule number {n} about something long enough", (n,), (n,))
                              for n in range(200)], 0.5, 0)
    ids = Section("Identifiers", [Item(f"- id-{n}", (n,), (n,)) for n in range(10)], 0.01, 5)
    text = pack([rules, ids], 400, COUNTER)
    assert COUNTER.text(text) <= 400
    # The low-priority section's best items are kept although the first section could take it all.
    assert "- id-0" in text and "- id-1" in text
    assert "- rule number 0 " in text


def test_a_long_first_item_of_an_important_section_is_kept_whole():
    plan = Section("Plan", [Item("- plan\n" + " ".join(f"step{n}" for n in range(120)), (0,), (0,), shrinkable=True)],
                   0.05, 1)
    other = Section("Other", [Item(f"- other {n}", (n,), (n,)) for n in range(300)], 0.9, 2)
    text = pack([plan, other], 600, COUNTER)
    assert "step119" in text and "[…]" not in text


def _bd(c: Convo, command: str, output: str) -> None:
    c.tool("Bash", {"command": command}, output)


def test_rules_of_closed_issues_rank_after_rules_that_still_apply():
    c = Convo()
    c.user("Work on p-1 then p-2.")
    # The open issue's rules are the older ones: newest-first alone would drop them first.
    _bd(c, "bd show p-2", "○ p-2 · New part   [● P2 · OPEN]\nArchitecture constraints:\n"
        "- New rule must hold while the work goes on.")
    _bd(c, "bd show p-1", "○ p-1 · Old part   [● P2 · OPEN]\nArchitecture constraints:\n"
        + "\n".join(f"- Old rule {n} must hold for the finished part." for n in range(12)))
    _bd(c, "bd close p-1", "✓ Closed p-1: Closed")
    for n in range(6):
        c.tool("Bash", {"command": f"mix test t{n}.exs"}, f"{n} tests, 0 failures")
    request = SummaryRequest(messages=c.messages, budget_tokens=350)
    text = StructuredSummarizer().summarize(request, COUNTER).text
    assert "New rule must hold" in text
    kept_old = [n for n in range(12) if f"Old rule {n} " in text]
    assert len(kept_old) < 12  # the finished part's rules gave way first


def test_command_forms_and_tools_used_are_named_and_a_worked_around_failure_is_listed_once():
    c = Convo()
    c.user("Ship it.")
    for n in range(3):
        c.tool("Bash", {"command": f"mix credo --strict 2>&1 | tail -{n + 5}"}, "no issues")
    c.tool("Bash", {"command": "git push"}, "fatal: The current branch x has no upstream branch.", is_error=True)
    c.tool("Bash", {"command": "git push --set-upstream origin x"}, "done")
    text = StructuredSummarizer().summarize(SummaryRequest(messages=c.messages, budget_tokens=2_000), COUNTER).text
    assert "`mix credo --strict` (3)" in text
    assert "tools used: Bash (5)" in text
    assert text.count("has no upstream branch") == 1


def test_an_issue_closed_then_listed_open_again_counts_as_open():
    from worksurface.ledger import Ledger
    from worksurface.summarizers.tracker import closed_issues
    c = Convo()
    c.user("Do the epic.")
    _bd(c, "bd close p-1 p-1.1", "✓ Closed p-1: Closed\n✓ Closed p-1.1: Closed")
    assert closed_issues(Ledger.over(c.messages).upto()) == {"p-1", "p-1.1"}
    _bd(c, "bd show p-1.2", "○ p-1.2 · New child   [● P2 · OPEN]\n\nPARENT\n  ↑ ◐ p-1: (EPIC) The epic ● P2\n")
    assert closed_issues(Ledger.over(c.messages).upto()) == {"p-1.1"}


def test_an_identifier_another_section_quotes_word_for_word_is_not_listed_again() -> None:
    quoted = Section("Work", [Item("- `git push --set-upstream origin feature` -> done", (0,), (0,))], 0.5, 1)
    ids = Section("Identifiers", [Item("`git push --set-upstream origin feature`", (0,), (0,), "commands:"),
                                  Item("`mix test --cover`", (1,), (1,), "commands:")], 0.5, 2,
                  inline=True, skip_repeats=True)
    text = pack([quoted, ids], 500, COUNTER)
    assert text.count("git push --set-upstream origin feature") == 1 and "mix test --cover" in text
    rules = Section("Rules", [Item("- `git push --set-upstream origin feature` -> done", (0,), (0,))], 0.5, 2)
    assert pack([quoted, rules], 500, COUNTER).count("git push --set-upstream") == 2  # a rule is kept where it is


def test_filler_waits_until_every_sections_facts_are_placed() -> None:
    first = Section("A", [Item(f"- filler {n}", (1, n), (1, n), filler=True) for n in range(40)], 0.9, 0)
    second = Section("B", [Item(f"- fact {n}", (n,), (n,)) for n in range(10)], 0.1, 1)
    text = pack([first, second], 120, COUNTER)
    assert all(f"fact {n}" in text for n in range(10))
    assert "filler 0" in text  # filler still uses what is left
