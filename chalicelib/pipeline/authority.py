"""What a request's caller is and may do, as the pipeline and the faces ask it.

The authorizer (auth/plugin.py) puts one object on the request: auth/authorization.Authorization
for a signed caller; a route the authorizer lets through unsigned keeps UNRESTRICTED. These are
protocols, not imports of auth/, because auth/ builds on the pipeline (the import contracts allow
no cycle).
"""

from __future__ import annotations

from typing import Any, Protocol


class Caller(Protocol):
    """Who is asking: auth/identities.Principal, as far as the pipeline and the faces read it."""

    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def uuid(self) -> str: ...
    @property
    def is_root(self) -> bool: ...
    @property
    def trusted_engine(self) -> bool: ...
    @property
    def token_key(self) -> bytes: ...
    @property
    def arn(self) -> str: ...


class Authority(Protocol):
    """The policy questions a face asks about the caller (resources are auth.arns.Resource)."""

    def visible(self, action: str, resource: Any, cond: dict[str, str], partial: bool = False) -> bool:
        """May the caller do this (partial: to some item of this set)? A list filters with it."""
        ...

    def denied(self, action: str, resource: Any, cond: dict[str, str]) -> bool:
        """An explicit Deny, told apart from no grant."""
        ...

    def read_rule(self, resource: Any, cond: dict[str, str]) -> tuple[Any, ...]:
        """The caller's s3tables:GetTableData statements the catalog enforces (core.model.ReadRule)."""
        ...

    def read_policy(self, resource: Any, cond: dict[str, str]) -> tuple[Any, ...]:
        """The statements as the policies say them, for the read restrictions a loadTable answer
        carries (a trusted engine enforces them itself)."""
        ...

    def may_write_data(self, resource: Any, cond: dict[str, str]) -> bool:
        """Whether it may write the table's data (core/access/data_actions.py says by which action)."""
        ...

    def may_limit_reads(self, tables: Any) -> bool:
        """Whether some table of a set may have the caller's reads limited (GetConfig's planning mode)."""
        ...


class Unrestricted:
    """A route no authorizer checks (the token endpoint, the console's page, a test's pipeline):
    everything visible, every row readable, nothing denied."""

    def visible(self, action: str, resource: Any, cond: dict[str, str], partial: bool = False) -> bool:
        return True

    def denied(self, action: str, resource: Any, cond: dict[str, str]) -> bool:
        return False

    def read_rule(self, resource: Any, cond: dict[str, str]) -> tuple[Any, ...]:
        from chalicelib.core.model import EVERYTHING

        return EVERYTHING

    def read_policy(self, resource: Any, cond: dict[str, str]) -> tuple[Any, ...]:
        return self.read_rule(resource, cond)

    def may_write_data(self, resource: Any, cond: dict[str, str]) -> bool:
        return True

    def may_limit_reads(self, tables: Any) -> bool:
        return False


UNRESTRICTED: Authority = Unrestricted()
