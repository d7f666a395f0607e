"""Routes: each face declares its operations in a RouteGroup (path, method, IAM-style action, how
to name the policy resource); registering a group binds each to the pipeline's dispatch in a
Chalice app, and every other method on a known path answers 405 in that face's shape."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from chalice.app import Chalice, Response

from chalicelib.errors import MethodNotAllowed
from chalicelib.face import Face
from chalicelib.pipeline.dispatch import Spec, dispatch
from chalicelib.pipeline.failures import error_response
from chalicelib.pipeline.request import Check, RequestContext

JSON_TYPES = ["application/json", "application/x-www-form-urlencoded", "text/plain"]


@dataclass(frozen=True)
class RouteInfo:
    method: str
    path: str
    action: str
    iceberg: bool
    group: str = ""


ROUTES: list[RouteInfo] = []


class RouteGroup:
    """A route group's operations; unlike a Chalice Blueprint it can be registered in several apps
    (the all-in-one app and its own per-group app), each view bound to the app that dispatches it."""

    def __init__(self, name: str, face: Face, content_types: list[str] | None = None) -> None:
        self.name = name
        self.face = face
        self.content_types = content_types or JSON_TYPES
        self.specs: list[Spec] = []

    def register(self, app: Chalice) -> None:
        for spec in self.specs:
            app.route(spec.path, methods=[spec.method], content_types=self.content_types, name=spec.view_name)(
                _make_view(app, spec)
            )


Handler = TypeVar("Handler", bound=Callable[[RequestContext], Any])


def operation(
    group: RouteGroup,
    path: str,
    method: str,
    action: str,
    *,
    iceberg: bool = True,
    checks: Callable[[RequestContext], list[Check]] | None = None,
    resolve: Callable[[RequestContext], None] | None = None,
) -> Callable[[Handler], Handler]:
    """Declare a handler taking a RequestContext and returning (status, body[, headers]).

    ``checks`` names the policy resource and conditions of the action; ``resolve`` sets the action
    and checks per request, for a face that dispatches many operations on one route."""

    def register(handler: Handler) -> Handler:
        ROUTES.append(RouteInfo(method, path, action, iceberg, group.name.rsplit(".", 1)[-1]))
        view_name = f"{action}_{method}_{len(ROUTES)}"
        group.specs.append(Spec(path, method, action, handler, view_name, group.face, checks, resolve))
        return handler

    return register


def _make_view(app: Chalice, spec: Spec) -> Callable[..., Response]:
    def view(**params: str) -> Response:
        return dispatch(app.current_request, spec, params)

    view.__name__ = spec.view_name
    view.__dict__["face"] = spec.face  # method_not_allowed answers in this face's shape
    return view


def method_not_allowed(app: Chalice) -> None:
    """Every other method on a known path answers 405 in the error shape of the face serving it."""
    every = ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH")
    for path, views in list(app.routes.items()):
        missing = [m for m in every if m not in views]
        if not missing:
            continue
        face = next(f for entry in views.values() if (f := getattr(entry.view_function, "face", None)))

        def view(_allowed: tuple[str, ...] = tuple(sorted(views)), _face: Face = face, **_: str) -> Response:
            err = MethodNotAllowed(f"Method not allowed here; allowed: {', '.join(_allowed)}")
            request = app.current_request
            assert request is not None  # a view runs for a request
            return error_response(err, _face, head=request.method == "HEAD")

        name = "not_allowed_" + str(abs(hash(path)))
        view.__name__ = name
        app.route(path, methods=missing, content_types=JSON_TYPES, name=name)(view)
