"""How much of a view a provider's prompt cache could serve: the longest common prefix, in tokens, of
consecutive views. The logic lives in the core (`worksurface.engine.pricing`, which also bills it); re-exported
here for the benchmark sections."""

from __future__ import annotations

from worksurface.engine.pricing import common_prefix_tokens, same_content

__all__ = ["common_prefix_tokens", "same_content"]
