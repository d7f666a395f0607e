"""The catalog's own update types in PyIceberg's update logic (updates.py, encryption.py).

PyIceberg applies an update with the singledispatch function `_apply_table_update`, and a commit's
context records the updates applied. Both take any update model at run time; their annotations
name only PyIceberg's own update union, which the catalog's types are no part of.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from pyiceberg.table.update import _apply_table_update, _TableMetadataUpdateContext
from pyiceberg.typedef import IcebergBaseModel

if TYPE_CHECKING:
    from pyiceberg.table.update import TableUpdate

_Apply = TypeVar("_Apply", bound=Callable[..., Any])


def register_update(kind: type[IcebergBaseModel]) -> Callable[[_Apply], _Apply]:
    """`@_apply_table_update.register(kind)`: the decorated function applies updates of `kind`."""

    def register(apply: _Apply) -> _Apply:
        # register(cls, func) as a plain callable: the checker's singledispatch rule wants cls to
        # be a subtype of the fallback's (PyIceberg's) update union.
        dispatch: Callable[[type[Any], _Apply], object] = _apply_table_update.register
        dispatch(kind, apply)
        return apply

    return register


def record_update(context: _TableMetadataUpdateContext, update: IcebergBaseModel) -> None:
    """`context.add_update(update)` for one of the catalog's update types (the context keeps a list)."""
    context.add_update(cast("TableUpdate", update))
