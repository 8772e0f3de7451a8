"""The user's words in the harness's own records of its question and permission prompts.

When the agent asks with the harness's question tool, the harness records the user's answers in
the result record it writes itself (Claude Code's `toolUseResult: {"questions": [...], "answers":
{...}}`); when the user rejects a call and types why, the harness writes its fixed rejection text
with the user's words after it (`provenance.is_harness_rejection`). Those words are the user's, as
binding as a typed message: an answer is a decision the user made (and, when it is not the option
the agent recommended, that option is an approach the user turned down), and a rule in either is a
standing constraint of the user's. Each reading follows the record's structure, never a tool's name
or what a tool printed: the same text inside a command's output is the world's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ..core.model import Message, Origin
from .approaches import REJECTED, Approach
from .commands import rejection_words
from .constraints import USER, Constraint, rules_in
from .provenance import claude_record
from .text import one_line

# Claude Code's question tool asks the agent to end the label of the option it recommends so.
RECOMMENDED_MARK = "(recommended)"
# One question or answer is a line or a short paragraph; longer text is cut (the user messages keep it).
MAX_QUESTION_CHARS, MAX_ANSWER_CHARS = 200, 600
# How a decision was made, and how the user's declining an option is worded.
ANSWERED = "answered"


@dataclass(frozen=True)
class Decision:
    """A choice the user made in the harness's question prompt, verbatim: the agent's question, the
    user's answer, the options offered and the one the agent recommended ("" when none was)."""

    question: str
    answer: str
    options: tuple[str, ...]
    recommended: str
    message_id: str
    index: int
    kind: str = ANSWERED

    @property
    def picked_option(self) -> bool:
        """The answer is one of the offered options (not words of the user's own)."""
        return _fold(self.answer) in {_fold(o) for o in self.options}

    @property
    def declined(self) -> bool:
        """The agent recommended an option and the user's answer is not it."""
        return bool(self.recommended) and not _fold(self.answer).startswith(_fold(self.recommended))

    @property
    def text(self) -> str:
        """As the harness writes it into the result: `"question"="answer"`."""
        return f'"{self.question}"="{self.answer}"'


def _unmarked(label: str) -> str:
    """An option's label without the recommendation mark."""
    text = label.rstrip()
    return text[: -len(RECOMMENDED_MARK)].rstrip() if text.casefold().endswith(RECOMMENDED_MARK) else text


def _fold(text: str) -> str:
    return " ".join(_unmarked(text).split()).casefold()


def answered_questions(message: Message, index: int) -> list[Decision]:
    """The user's answers in one message, read from the harness's record of its question prompt: the
    record echoes the questions it asked (with their options) beside the answers, which a tool's own
    output does not. [] for anything else."""
    record = claude_record(message)
    if record is None or message.role != "user" or message.origin is not Origin.CONVERSATION \
            or not message.tool_results:
        return []
    result: Any = record.get("toolUseResult")
    if not isinstance(result, dict):
        return []
    answers, questions = result.get("answers"), result.get("questions")
    if not isinstance(answers, dict) or not isinstance(questions, list):
        return []
    asked = {str(q.get("question")): q for q in questions if isinstance(q, dict)}
    out = []
    for question, answer in answers.items():
        said = str(answer).strip()
        if not said:
            continue
        options = asked.get(str(question), {}).get("options")
        labels = tuple(str(o["label"]) for o in options if isinstance(o, dict) and isinstance(o.get("label"), str)) \
            if isinstance(options, list) else ()
        recommended = next((_unmarked(label) for label in labels if _unmarked(label) != label.rstrip()), "")
        out.append(Decision(one_line(str(question), MAX_QUESTION_CHARS), one_line(said, MAX_ANSWER_CHARS), labels,
                            recommended, message.id, index))
    return out


def user_decisions(messages: Sequence[Message]) -> list[Decision]:
    """Every answer the user gave to the agent's questions, oldest first."""
    return [d for i, m in enumerate(messages) for d in answered_questions(m, i)]


def declined_recommendations(messages: Sequence[Message]) -> list[Approach]:
    """The options the agent recommended and the user did not choose, each with the user's answer:
    approaches the user turned down, so the next pass does not propose them again."""
    return [Approach(REJECTED, f'the agent recommended "{d.recommended}" for "{d.question}"; '
                               f'the user answered: "{d.answer}"', (d.message_id,), d.index)
            for d in user_decisions(messages) if d.declined]


def rules_given(messages: Sequence[Message]) -> list[Constraint]:
    """Rules the user stated in the words typed when rejecting a call (the harness's rejection
    record) or in a free-text answer to the agent's question: the user's standing constraints."""
    out: list[Constraint] = []
    for i, m in enumerate(messages):
        if m.role != "user" or m.origin is not Origin.CONVERSATION:
            continue
        said = [w for r in m.tool_results if (w := rejection_words(r, m))]
        said += [d.answer for d in answered_questions(m, i) if not d.picked_option]
        for text in said:
            out += [Constraint(rule, USER, m.id, i, strength=strength) for rule, strength in rules_in(text)]
    return out
