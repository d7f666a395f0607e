"""The primitives every part of the core builds on: the request context, conditional writes and
their retries (cas), damaged-object handling, parallel S3 calls, group commit, listing marks, the
typed pointer record, transaction claims, the audit trail every commit point's write carries,
idempotency keys, and entry versions. It imports nothing else of the core (`.importlinter`,
"The core's parts")."""
