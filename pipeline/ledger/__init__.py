"""The surface ledger: the agent's working state as typed, persistent records (see ledger.py)."""

from .ledger import Ledger, LedgerView
from .source import FactSource

__all__ = ["FactSource", "Ledger", "LedgerView"]
