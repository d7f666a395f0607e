"""The authenticator and authorizer plugged into the pipeline, globally or per action
(auth/plugin.py installs the catalog's; a test's pipeline lets everyone through)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from chalicelib.pipeline.authority import Caller
from chalicelib.pipeline.request import RequestContext


class Authenticator(Protocol):
    def authenticate(self, ctx: RequestContext) -> Caller | None: ...


class Authorizer(Protocol):
    def authorize(self, ctx: RequestContext) -> None: ...


class AllowAnonymous:
    def authenticate(self, ctx: RequestContext) -> Caller | None:
        return None

    def authorize(self, ctx: RequestContext) -> None:
        return None


@dataclass
class Pipeline:
    authenticator: Authenticator = field(default_factory=AllowAnonymous)
    authorizer: Authorizer = field(default_factory=AllowAnonymous)
    per_action: dict[str, tuple[Authenticator, Authorizer]] = field(default_factory=dict)

    def for_action(self, action: str) -> tuple[Authenticator, Authorizer]:
        return self.per_action.get(action, (self.authenticator, self.authorizer))


PIPELINE = Pipeline()
