"""The status bar: events -> reduce -> validate -> diff -> render -> publish.

Harnesses emit events (`session.emit(event)`); saved transcripts yield them through
`derive_events`. The snapshot is a pure function of the event log, and publishing decides what
status messages go at the tail of the view under the `append`, `replace` or `delta` strategy.
"""

from .derive import derive_events, result_fingerprints
from .diff import Diff, SectionDiff, diff
from .events import (Cleared, EnvironmentChanged, Event, FilesTouched, PermissionsChanged,
                     RepositoryChanged, ResourcesChanged, StatusError, StatusEventError, TaskUpdated,
                     TodoItem, ToolFinished, ToolStarted, VerificationFinished, event_from_json,
                     event_to_json)
from .publish import DEFAULT_STRATEGY, KINDS, STRATEGIES, Publication, PublisherState, publish
from .reducer import StatusReducer, reduce
from .render import render, render_cleared, render_delta
from .snapshot import EMPTY, Field, Snapshot, validate

__all__ = [
    "Cleared", "DEFAULT_STRATEGY", "Diff", "EMPTY", "EnvironmentChanged", "Event", "Field",
    "FilesTouched", "KINDS", "PermissionsChanged", "Publication", "PublisherState", "RepositoryChanged",
    "ResourcesChanged", "STRATEGIES", "SectionDiff", "Snapshot", "StatusError", "StatusEventError",
    "StatusReducer", "TaskUpdated", "TodoItem", "ToolFinished", "ToolStarted", "VerificationFinished",
    "derive_events", "diff", "event_from_json", "event_to_json", "publish", "reduce", "render",
    "render_cleared", "render_delta", "result_fingerprints", "validate",
]
