"""The surface ledger: the agent's working state as typed, persistent records (see ledger.py)."""

from .ledger import Ledger
from .records import LedgerView
from .source import FactSource

__all__ = ["FactSource", "Ledger", "LedgerView"]
