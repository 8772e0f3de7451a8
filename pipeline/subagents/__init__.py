"""Sub-agents: briefings for a fresh sub-agent (a selection from the ledger) and the sidechain
transcripts linked to the parent calls that launched them (seed 003)."""

from .brief import Brief, BriefLine, build_brief
from .sidechains import Link, Sidechain, SidechainTree, sidechain_tree

__all__ = ["Brief", "BriefLine", "Link", "Sidechain", "SidechainTree", "build_brief", "sidechain_tree"]
