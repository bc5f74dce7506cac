"""Moved to syft_lab.commands (a leaf module); these names stay until every user is switched."""
from ..commands import LOCAL, current_holder, held_by

__all__ = ["LOCAL", "current_holder", "held_by"]
