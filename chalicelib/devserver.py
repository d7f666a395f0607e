"""Serve the app the way `chalice local` does, with Nagle disabled for keep-alive clients."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chalice.local import LocalGateway


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve the catalog with chalice's local server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=int(os.environ.get("CATALOG_PORT", "8181")))
    parser.add_argument("--project-dir", default=os.getcwd())
    args = parser.parse_args(argv)

    from chalice.cli import factory
    from chalice.local import ChaliceRequestHandler, LocalGateway, create_local_server

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from chalicelib import telemetry

    telemetry.logger()  # the catalog's own lines are JSON, as in the functions
    telemetry.enable_prometheus()  # GET /metrics (root only)
    # PyIceberg and other keep-alive clients stall ~40 ms per request on Nagle + delayed ACK.
    ChaliceRequestHandler.disable_nagle_algorithm = True
    _unknown_routes_are_404(LocalGateway)
    sys.path.insert(0, args.project_dir)
    cli = factory.CLIFactory(project_dir=args.project_dir)
    app = cli.load_chalice_app()
    config = cli.create_config_obj(chalice_stage_name="dev")
    server = create_local_server(app, config, args.host, args.port)
    from chalicelib import warmup

    warmup.tables()  # a server pays PyIceberg's imports at start, not in its first create
    warmup.transactions()
    server.serve_forever()


def _unknown_routes_are_404(gateway: type[LocalGateway]) -> None:
    """API Gateway's 403 "Missing Authentication Token" for an unknown path becomes Iceberg's 404."""
    import json

    original = gateway.handle_request

    def handle_request(
        self: LocalGateway, method: str, path: str, headers: dict[str, Any], body: bytes | None
    ) -> dict[str, Any]:
        try:
            self.event_converter._route_matcher.match_route(path)
        except ValueError:
            error = {"message": f"No route for {path.split('?', 1)[0][:200]}", "type": "NotFound", "code": 404}
            return {
                "statusCode": 404,
                "headers": {"Content-Type": "application/json"},
                "multiValueHeaders": {},
                "body": json.dumps({"error": error}),
            }
        return original(self, method, path, headers, body)

    gateway.handle_request = handle_request  # type: ignore[method-assign]


if __name__ == "__main__":
    main()
