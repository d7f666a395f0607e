"""Serve the app the way `chalice local` does, with Nagle disabled for keep-alive clients."""

from __future__ import annotations

import argparse
import logging
import os
import sys


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve the catalog with chalice's local server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=int(os.environ.get("CATALOG_PORT", "8181")))
    parser.add_argument("--project-dir", default=os.getcwd())
    args = parser.parse_args(argv)

    from chalice.cli import factory
    from chalice.local import ChaliceRequestHandler, create_local_server

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # PyIceberg and other keep-alive clients stall ~40 ms per request on Nagle + delayed ACK.
    ChaliceRequestHandler.disable_nagle_algorithm = True
    sys.path.insert(0, args.project_dir)
    cli = factory.CLIFactory(project_dir=args.project_dir)
    app = cli.load_chalice_app()
    config = cli.create_config_obj(chalice_stage_name="dev")
    server = create_local_server(app, config, args.host, args.port)
    server.serve_forever()


if __name__ == "__main__":
    main()
