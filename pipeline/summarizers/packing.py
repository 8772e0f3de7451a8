"""Fitting ranked items into sections under a token budget, deterministically.

Each section gets a share of the budget and fills it with its most important items; what a section
leaves unused goes to the others in priority order; long verbatim items are cut with an elision
marker rather than dropped when they are the most important thing left. A final check on the
rendered text drops the least important items until it fits, then cuts the text itself, so the
budget holds on any input.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ..core.escape import escape_quoted, one_line
from ..core.tokens import TokenCounter, truncate_to_tokens
from .sections import HEADINGS, TITLE

# Headings no quoted text may pass for: the summary's title and sections.
RESERVED_HEADINGS = (TITLE.lstrip("# "), *HEADINGS)
# An item is only cut to fit when at least this many tokens of it can stay: a sliver says nothing.
MIN_SHRUNK_TOKENS = 24
# Cut items keep this share of their room from the start, the rest from the end (where outputs and
# long messages often say what matters last).
HEAD_SHARE = 0.7
ELISION = " […] "
# Newline and list framing around one item, beyond its own text.
ITEM_OVERHEAD = 1
INLINE_SEPARATOR = " | "
# After the first claims, the room left is shared out in rounds: each round offers every section
# its next item and more up to this share of what is left (at least ROUND_MIN_TOKENS, a list line).
ROUND_SHARE = 0.05
# The first claims (shares) take this part of the room; the rest is shared out in rounds, so a long
# item high in an important section (a plan, a long request) still finds room in an early round.
FIRST_CLAIM = 0.5
ROUND_MIN_TOKENS = 30
# A section's step is scaled by its share of the budget over this (a typical share).
ROUND_NORMAL_SHARE = 0.1
# Essential items (the rules in force, what the user decided, the approaches ruled out) are placed
# before any section's first claim, within this share of the room: losing one costs a wrong turn,
# while the twentieth file path or a finished item's description costs nothing to lose.
ESSENTIAL_SHARE = 0.4
ESSENTIAL_LEVELS = (1, 2)
# An item repeating chosen text verbatim is skipped only when at least this long (a short value
# such as a branch name says something in its own list).
MIN_REDUNDANT_CHARS = 16


@dataclass(frozen=True)
class Item:
    """One line (or block) of a section. `rank`: smaller is kept first; `order`: display position.

    What an item quotes is escaped as it is made (core.escape): no quoted text can close or open a
    wrapper, pass for a harness note or start a section of the summary, and a group label stays on
    its line. `quoted=False` only for worksurface's own framing (the summary's title)."""

    text: str
    rank: tuple[Any, ...]
    order: tuple[Any, ...] = ()
    group: str = ""
    shrinkable: bool = False
    # Filler (rank it after the section's other items): offered only once no section has a
    # non-filler item left that fits, so one section's filler never displaces another's facts.
    filler: bool = False
    quoted: bool = True
    # Standing state a small summary keeps before anything else (see ESSENTIAL_SHARE): 1 what the
    # user decided or ruled out, 2 the other rules and exclusions; 0 an ordinary item.
    essential: int = 0

    def __post_init__(self) -> None:
        if self.quoted:
            object.__setattr__(self, "text", escape_quoted(self.text, RESERVED_HEADINGS))
        if self.group:
            object.__setattr__(self, "group", escape_quoted(one_line(self.group), RESERVED_HEADINGS))


@dataclass
class Section:
    """A heading and its candidate items. `share` of the budget is its first claim; `cap` an
    absolute limit; `priority` 0 is the most important section."""

    heading: str
    items: list[Item]
    share: float
    priority: int
    cap: int | None = None
    empty: str = "- none"
    inline: bool = False
    # An item this section would repeat verbatim from another section's chosen text is skipped (a
    # list of identifiers naming what a line elsewhere already quotes); a rule or a quote is not.
    skip_repeats: bool = False
    chosen: list[Item] = field(default_factory=list)
    used: int = 0
    # Say how many items were left out for room instead of showing fewer, or "none", as if that
    # were all there was.
    note_left_out: bool = False

    def left_out(self) -> int:
        return len(self.items) - len(self.chosen)


def left_out_line(section: Section) -> str:
    """`- 13 of 16 items left out for room (3 shown)`."""
    return f"- {section.left_out()} of {len(section.items)} items left out for room ({len(section.chosen)} shown)"


def render_section(section: Section, omit_empty: bool = False) -> str:
    lines = [f"## {section.heading}"] if section.heading else []
    items = sorted(section.chosen, key=lambda it: it.order)
    omitted = section.note_left_out and section.left_out() > 0
    if not items:
        if omit_empty and not omitted:
            return ""
        if section.heading:
            lines.append(left_out_line(section) if omitted else section.empty)
        return "\n".join(lines)
    groups: dict[str, list[Item]] = {}
    for it in items:
        groups.setdefault(it.group, []).append(it)
    for group, members in groups.items():
        if section.inline:
            joined = INLINE_SEPARATOR.join(m.text for m in members)
            lines.append(f"{group} {joined}".strip())
        else:
            if group:
                lines.append(group)
            lines += [m.text for m in members]
    if omitted:
        lines.append(left_out_line(section))
    return "\n".join(lines)


def render(sections: list[Section], omit_empty: bool = False) -> str:
    return "\n\n".join(t for t in (render_section(s, omit_empty) for s in sections) if t)


def shrink(item: Item, tokens: int) -> Item | None:
    """The item cut to about `tokens` tokens (start and end kept, elision marker between), or None."""
    if tokens < MIN_SHRUNK_TOKENS:
        return None
    head = truncate_to_tokens(item.text, int(tokens * HEAD_SHARE))
    tail = truncate_to_tokens(item.text, tokens - int(tokens * HEAD_SHARE) - 3, keep="tail")
    if not head or len(head) + len(tail) >= len(item.text):
        return None
    return replace(item, text=head.rstrip() + ELISION + tail.lstrip())


class _Packer:
    def __init__(self, sections: list[Section], budget: int, counter: TokenCounter, omit_empty: bool = False) -> None:
        self.sections = sorted(sections, key=lambda s: s.priority)
        self.budget = budget
        self.counter = counter
        self.omit_empty = omit_empty
        self.groups: dict[int, set[str]] = {id(s): set() for s in sections}
        # Each section's chosen items as a set: membership is asked for every item of every round,
        # and a list's grows with the summary (quadratic on a session of many small facts).
        self.chosen: dict[int, set[Item]] = {id(s): set(s.chosen) for s in sections}
        self.total = counter.text(render(sections, omit_empty))  # headings and empty markers
        # What the chosen items already say (folded), so an item another section already shows
        # word for word (a commit both listed and named, a command both run and listed) costs nothing.
        self.said = ""
        self.redundant: set[int] = set()
        self.allow_filler = False
        # Each section's items in rank order and where its next round starts (see `offer`).
        self.ranked: dict[int, tuple[list[Item], int]] = {}

    def cost(self, section: Section, item: Item) -> int:
        n = self.counter.text(item.text) + ITEM_OVERHEAD
        if section.inline:
            n += 2
        if item.group not in self.groups[id(section)]:
            n += self.counter.text(item.group) + ITEM_OVERHEAD
        if not section.chosen:
            if self.omit_empty:  # the heading appears with the first item
                n += self.counter.text(f"## {section.heading}") + 2 if section.heading else 0
            else:
                n -= self.counter.text(section.empty)  # the empty marker goes away
        return n

    def repeats(self, section: Section, item: Item) -> bool:
        """The item says nothing the chosen items do not already say verbatim (it is then skipped)."""
        if not section.skip_repeats:
            return False
        if id(item) in self.redundant:
            return True
        key = _fold(item.text)
        if len(key) >= MIN_REDUNDANT_CHARS and key in self.said:
            self.redundant.add(id(item))
            return True
        return False

    def take(self, section: Section, item: Item, cost: int) -> None:
        self.said += "\n" + _fold(item.text)
        section.chosen.append(item)
        self.chosen[id(section)].add(item)
        section.used += cost
        self.total += cost
        self.groups[id(section)].add(item.group)

    def fill(self, section: Section, limit: int, may_cut: bool = True) -> None:
        """Add the section's best remaining items, in rank order, while the section stays within
        `limit` tokens. An item that does not fit stops the filling (a less important item never
        jumps ahead of it) unless it could never fit, or can be cut to fit (when `may_cut`)."""
        for item in sorted(section.items, key=lambda it: it.rank):
            if item in self.chosen[id(section)] or self.repeats(section, item):
                continue
            if item.filler and not self.allow_filler:
                break
            room = min(limit - section.used, self.budget - self.total)
            if section.cap is not None:
                room = min(room, section.cap - section.used)
            cost = self.cost(section, item)
            if cost <= room:
                self.take(section, item, cost)
                continue
            if item.shrinkable and may_cut:
                overhead = cost - self.counter.text(item.text)
                cut = shrink(item, room - overhead - 2)
                if cut is not None:
                    section.items[section.items.index(item)] = cut
                    self.ranked.pop(id(section), None)
                    self.take(section, cut, self.cost(section, cut))
                    continue
            if cost <= min(limit, section.cap if section.cap is not None else limit, self.budget):
                break

    def offer(self, section: Section, step: int) -> bool:
        """One round for `section`: its next items in rank order, at least one and then while they
        stay within `step` tokens, each only whole and only if it fits what is left. False once the
        section has nothing left that fits (the final pass may still cut an item to fit)."""
        took = 0
        ranked, start = self.ranked.get(id(section)) or (sorted(section.items, key=lambda it: it.rank), 0)
        chosen = self.chosen[id(section)]
        # The items before the first one neither chosen nor a repeat stay so (chosen items and what
        # they say only grow while the rounds run): each round starts after them, not at the top.
        while start < len(ranked) and (ranked[start] in chosen or self.repeats(section, ranked[start])):
            start += 1
        self.ranked[id(section)] = (ranked, start)
        for item in ranked[start:]:
            if item in chosen or self.repeats(section, item):
                continue
            if item.filler and not self.allow_filler:
                return False
            room = self.budget - self.total
            if section.cap is not None:
                room = min(room, section.cap - section.used)
            cost = self.cost(section, item)
            if cost > room:
                return False
            if took and took + cost > step:
                return True
            self.take(section, item, cost)
            took += cost
        return False

    def place_essential(self, room: int) -> None:
        """Take the essential items, level by level and each section's in rank order, while they
        stay within ESSENTIAL_SHARE of the room (an item too long for what is left is passed over)."""
        cap = int(room * ESSENTIAL_SHARE)
        used = 0
        for level in ESSENTIAL_LEVELS:
            for s in self.sections:
                for item in sorted((it for it in s.items if it.essential == level), key=lambda it: it.rank):
                    if item in self.chosen[id(s)]:
                        continue
                    cost = self.cost(s, item)
                    room_left = self.budget - self.total
                    if s.cap is not None:
                        room_left = min(room_left, s.cap - s.used)
                    if used + cost > cap or cost > room_left:
                        continue
                    self.take(s, item, cost)
                    used += cost

    def run(self) -> None:
        room = max(0, self.budget - self.total)
        self.place_essential(room)
        # First claims take whole items only: a long item cut to a small share would stay cut.
        for s in self.sections:
            self.fill(s, int(room * s.share * FIRST_CLAIM), may_cut=False)
        # What the shares left goes round the sections in rounds, most important section first in
        # each: every round offers each section its next item (and more up to a step of tokens), so
        # one section's 40th item never comes before another's 3rd (value per token across
        # sections, not section order alone).
        # Fillers go round the same way, once every section's other items are placed.
        for allow_filler in (False, True):
            self.allow_filler = allow_filler
            open_sections = list(self.sections)
            while open_sections:
                step = max(ROUND_MIN_TOKENS, int((self.budget - self.total) * ROUND_SHARE))
                open_sections = [s for s in open_sections if self.offer(s, int(step * s.share / ROUND_NORMAL_SHARE))]
        for s in self.sections:
            self.fill(s, self.budget)


def _fold(text: str) -> str:
    """Text compared for repeats: list and code marks dropped, case and spacing folded."""
    return " ".join(text.removeprefix("- ").replace("`", "").lower().split())


def pack(sections: list[Section], budget: int, counter: TokenCounter, omit_empty: bool = False) -> str:
    """Render the sections with as many items as fit in `budget` tokens (measured on the final text);
    with `omit_empty`, a section with no item is left out whole (heading included)."""
    packer = _Packer(sections, budget, counter, omit_empty)
    packer.run()
    text = render(sections, omit_empty)
    # Token counts are not additive across joins: drop the least important items until it fits.
    by_weakness = sorted(sections, key=lambda s: -s.priority)
    while counter.text(text) > budget:
        victim = next((s for s in by_weakness if s.chosen), None)
        if victim is None:
            break
        victim.chosen.remove(max(victim.chosen, key=lambda it: it.rank))
        text = render(sections, omit_empty)
    limit = budget
    while text and counter.text(text) > budget:  # headings alone over a tiny budget
        text = truncate_to_tokens(text, max(0, limit))
        limit -= 1
    return text
