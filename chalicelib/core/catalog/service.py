"""Catalog-wide settings a face advertises (the REST config endpoint)."""

from __future__ import annotations

from chalicelib.core.idempotency import lifetime_iso as lifetime_iso
