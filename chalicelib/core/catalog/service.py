"""Catalog-wide settings a face advertises (the REST config endpoint)."""

from __future__ import annotations

from chalicelib.core.primitives.idempotency import lifetime_iso as lifetime_iso
