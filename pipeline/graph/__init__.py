"""The staged graph: composes the registered stages and reinjectors into LangGraph's StateGraph
(`compose`), and walks the same nodes directly on calls where no stage edits."""
