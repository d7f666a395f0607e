"""The S3 key layout. Every object the catalog owns is named here, and only here.

System bucket (``CATALOG_SYSTEM_BUCKET``)::

    warehouses/{warehouse}.json            warehouse record: name, bucket, uuid, created-at,
                                           properties, state ("active" | "deleting")
    iam/users/{user}.json                  user: name, access-key ids, policies by name
    iam/access-keys/{access-key-id}.json   access key: user, secret
    iam/tokens/{sha256(token)}.json        bearer token: principal, access key, expiry; written by
                                           the auth function only (expired ones: lifecycle rule)
    iam/roles/{role}.json                  role (auth/roles.py): trust policy, permission policies,
                                           tags, maximum session duration, uuid
    iam/oidc-providers/{quoted host/path}.json  OpenID Connect provider: url, client ids, thumbprints, tags
    iam/sessions/{access-key-id}.json      STS session (auth/sessions.py): role and its uuid, secret,
                                           sha256 of the session token, expiry, session tags
    audit/{10^13 - last-ms:013d}-{source}-{seq}-{seq}.json   audit segment of a warehouse or user change
    idempotency/{sha256}.json              Idempotency-Key record: request fingerprint, then the
                                           finalized response to replay

Warehouse bucket (``{CATALOG_BUCKET_PREFIX}{warehouse}``), one per warehouse::

    .catalog/ns/{l1}.{l2}...{ln}.json      namespace record: levels, properties, state.
                                           Levels never contain '.', so the join is unambiguous.
    .catalog/tables/{l1}.{l2}.../{t}.json  table pointer: metadata-location, table-uuid, state
                                           ("active" | "pending" | "moved" | "dropped"), and a
                                           "claim" while a multi-table transaction holds it; every
                                           commit swaps it with If-Match on its ETag. Also: "version"
                                           (Glue VersionId, +1 per metadata change), "id" (this
                                           entry), "previous-metadata-location", "created-ms",
                                           "updated-ms", "glue" (a Glue client's TableInput),
                                           "client-location" (a Glue client chose the location),
                                           "kind": "view" for views, and for S3 Tables' tables
                                           created without metadata state "staged" with
                                           "location" / "location-uuid" (the uuid owning the
                                           location, kept after the first metadata arrives).
    .catalog/functions/{l1}.{l2}.../{f}.json  a function (the spec's UDF): its metadata location, uuid,
                                           state, audit tail; its one metadata file under
                                           {l1}/.../{f}-{random id}/metadata/ (kept while it is in the trash)
    .catalog/function-trash/{drop-id}.json  a dropped function kept for the warehouse's retention: its
                                           record, name, when it expires, state ("dropped" | "moved" |
                                           "restored" | "purging") (core/tables/functions.py)
    .catalog/resource-policies.json        S3 Tables table bucket and table policies (CAS)
    .catalog/uuids/{table-uuid}.json       claim of a table uuid, and so of its location: state
                                           "live" | "trashed" | "dropped" (files kept) | "purging";
                                           deleted when the purge is done (core/settling/purges.py).
                                           A "dropped" table's "released": what it gave up and who
                                           did (core/settling/releases.py); a register's "live" claim
                                           keeps the release it took in "consumed", with "claimed-ms"
    .catalog/purges/{table-uuid}.json      purge job: the location still to empty; the dropper
                                           starts it, the sweeper finishes it
    .catalog/hive/{l1}/{t}.json            a non-Iceberg (Hive-style) table stored through Glue:
                                           its TableInput, version, times; invisible to Iceberg REST
    .catalog/entries/{id}/versions/{n:020d}.json   archived version n of a table entry (Glue
                                           UpdateTable without SkipArchive); immutable
    .catalog/entries/{id}/partition-indexes.json   Glue partition indexes of a table entry (CAS)
    .catalog/entries/{id}/column-statistics.json   Glue column statistics of a table entry (CAS)
    .catalog/locations/{first segment}.json  client-chosen table locations (Glue creates) whose path
                                           starts with that segment, {"paths": {path: uuid}, "seq"}
                                           (CAS): no other table may nest in or over one; a released
                                           table's stays (core/access/locations.py)
    .catalog/locations/{location path}/@claim.json  the earlier one-claim-per-location layout, read
                                           once to seed a registry
    .catalog/listing/{l1}.{l2}.../         a namespace's listing projection (core/tables/projection.py):
        {name}/{ms:013d}-{nonce}           a mark (empty): a write at about ms may change how name lists
        @{ns-uuid}                         (empty) the projection of that namespace (its uuid) is complete
        @{ns-uuid}.{shard:02d}.json        a shard: the listed names whose crc32 falls in it, and kinds (CAS)
        @{ns-uuid}.scan.json               how far the first scan of an earlier release's namespace got (CAS)
    .catalog/listing/{l1}.{l2}....json     an earlier release's single listing snapshot, read once to migrate
    .catalog/views/entries/{l1}/{shard:02d}.json  what settles keep of new tables for Glue listings:
                                           name -> JSON text of its pointer ETag, pointer, metadata summary (CAS)
    .catalog/views/{view}/{l1}.json        a cache of list projections (e.g. Glue Table shapes) by
                                           entry key and ETag; never authoritative: a listing's ETags
                                           tell which entries to read again. Plain PUT.
    .catalog/trash/{drop-id}.json          a dropped table or view kept for the warehouse's retention:
                                           its pointer, name, state ("dropped" | "moved" | "purging")
    .catalog/audit/{10^13 - last-ms:013d}-{source}-{first seq:010d}-{last seq:010d}.json
                                           an immutable audit journal segment (core/primitives/audit.py); the
                                           source is a table's entry id or a namespace record's uuid
    .catalog/events/sinks/{sink}.json      a change-event sink: kind, target, filters, start (CAS)
    .catalog/events/cursors/{sink}.json    what the sink has been sent: last seq per trail source
                                           and the pointer ETags read (CAS by the dispatcher)
    .catalog/plans/{sha(location)}/{sha(reader)}/{expires-ms}-{nonce}/plan.json   a server-side
                                           scan plan: the scan, its manifest groups, how many are
                                           planned, status (CAS); expired by the sweeper
    .catalog/plans/.../{plan-id}/tasks/{n:06d}.json   the planned tasks of group n (immutable): the
                                           files a restricted reader's signer may then sign
    .catalog/events/dead/{sink}/{sink-uuid}/{event-id}.json   an event that kept failing, kept for replay
    .catalog/txns/{txn-id}.json            transaction record, written once (If-None-Match):
                                           "committed" with each table's old/new metadata (the
                                           commit point), or "aborted" by whoever closes it after
                                           its claims' lease; "pending" only from earlier versions.
    {l1}/{l2}/.../{t}-{uuid}/              table location, chosen by the catalog; it is unique
        metadata/{v:05d}-{uuid}.metadata.json   per table, so a rename never moves files and a
        data/...                                new table under an old name never shares them.

Metadata files are immutable: they are written once with If-None-Match and never rewritten.
"""

from __future__ import annotations

CATALOG_PREFIX = ".catalog/"
NS_PREFIX = CATALOG_PREFIX + "ns/"
TABLES_PREFIX = CATALOG_PREFIX + "tables/"
WAREHOUSES_PREFIX = "warehouses/"

Namespace = tuple[str, ...]


def warehouse_record(warehouse: str) -> str:
    return f"{WAREHOUSES_PREFIX}{warehouse}.json"


def warehouse_from_record(key: str) -> str:
    return key[len(WAREHOUSES_PREFIX) : -len(".json")]


def ns_id(namespace: Namespace) -> str:
    return ".".join(namespace)


def namespace_record(namespace: Namespace) -> str:
    return f"{NS_PREFIX}{ns_id(namespace)}.json"


def namespace_from_record(key: str) -> Namespace:
    return tuple(key[len(NS_PREFIX) : -len(".json")].split("."))


def child_namespaces_prefix(parent: Namespace) -> str:
    return f"{NS_PREFIX}{ns_id(parent)}." if parent else NS_PREFIX


def tables_prefix(namespace: Namespace) -> str:
    return f"{TABLES_PREFIX}{ns_id(namespace)}/"


def table_pointer(namespace: Namespace, table: str) -> str:
    return f"{tables_prefix(namespace)}{table}.json"


FUNCTIONS_PREFIX = CATALOG_PREFIX + "functions/"


def functions_prefix(namespace: Namespace) -> str:
    return f"{FUNCTIONS_PREFIX}{ns_id(namespace)}/"


def function_record(namespace: Namespace, function: str) -> str:
    """A function's record: its metadata location, uuid and audit tail (core/tables/functions.py)."""
    return f"{functions_prefix(namespace)}{function}.json"


def table_from_pointer(key: str) -> str:
    return key.rsplit("/", 1)[1][: -len(".json")]


def table_location(bucket: str, namespace: Namespace, table: str, table_uuid: str) -> str:
    return f"s3://{bucket}/{'/'.join(namespace)}/{table}-{table_uuid.replace('-', '')}"


def metadata_file(location: str, version: int, file_uuid: str) -> str:
    return f"{location}/metadata/{version:05d}-{file_uuid}.metadata.json"


def metadata_version(metadata_location: str) -> int:
    """The version number of a metadata file name; 0 when it does not follow the convention."""
    name = metadata_location.rsplit("/", 1)[-1]
    head = name.split("-", 1)[0]
    if head.isdigit():
        return int(head)
    if name.startswith("v") and name.split(".", 1)[0][1:].isdigit():
        return int(name.split(".", 1)[0][1:])
    return 0


def split_s3_uri(uri: str) -> tuple[str, str]:
    if not uri.startswith(("s3://", "s3a://", "s3n://")):
        raise ValueError(f"not an S3 URI: {uri}")
    bucket, _, key = uri.split("://", 1)[1].partition("/")
    return bucket, key


# ---- system bucket: identities (never reachable from a catalog route) ----------------------
IAM_PREFIX = "iam/"
IAM_USERS_PREFIX = IAM_PREFIX + "users/"
TOKENS_PREFIX = IAM_PREFIX + "tokens/"


def token_record(digest: str) -> str:
    return f"{TOKENS_PREFIX}{digest}.json"


def user_record(name: str) -> str:
    return f"{IAM_USERS_PREFIX}{name}.json"


def user_from_record(key: str) -> str:
    return key[len(IAM_USERS_PREFIX) : -len(".json")]


def access_key_record(access_key_id: str) -> str:
    return f"{IAM_PREFIX}access-keys/{access_key_id}.json"


IAM_ROLES_PREFIX = IAM_PREFIX + "roles/"
OIDC_PROVIDERS_PREFIX = IAM_PREFIX + "oidc-providers/"
SESSIONS_PREFIX = IAM_PREFIX + "sessions/"


def role_record(name: str) -> str:
    return f"{IAM_ROLES_PREFIX}{name}.json"


def role_from_record(key: str) -> str:
    return key[len(IAM_ROLES_PREFIX) : -len(".json")]


def oidc_provider_record(host_path: str) -> str:
    """host_path is the provider URL without its scheme; quoted whole, so '/' never nests keys."""
    from urllib.parse import quote

    return f"{OIDC_PROVIDERS_PREFIX}{quote(host_path, safe='')}.json"


def oidc_provider_from_record(key: str) -> str:
    from urllib.parse import unquote

    return unquote(key[len(OIDC_PROVIDERS_PREFIX) : -len(".json")])


# Records that carry their last change's audit entry until it is journaled (core/primitives/audit.py).
SYSTEM_RECORD_PREFIXES = (WAREHOUSES_PREFIX, IAM_USERS_PREFIX, IAM_ROLES_PREFIX, OIDC_PROVIDERS_PREFIX)


def session_record(access_key_id: str) -> str:
    return f"{SESSIONS_PREFIX}{access_key_id}.json"


# ---- warehouse bucket: table uuid claims and purge jobs ------------------------------------
UUIDS_PREFIX = CATALOG_PREFIX + "uuids/"
PURGES_PREFIX = CATALOG_PREFIX + "purges/"


def uuid_record(table_uuid: str) -> str:
    return f"{UUIDS_PREFIX}{table_uuid}.json"


def purge_job(table_uuid: str) -> str:
    return f"{PURGES_PREFIX}{table_uuid}.json"


# ---- warehouse bucket: multi-table transactions ----------------------------------------------
TXN_PREFIX = CATALOG_PREFIX + "txns/"


def txn_record(txn_id: str) -> str:
    return f"{TXN_PREFIX}{txn_id}.json"


# ---- system bucket: idempotency records ------------------------------------------------------
IDEMPOTENCY_PREFIX = "idempotency/"


def idempotency_record(digest: str) -> str:
    return f"{IDEMPOTENCY_PREFIX}{digest}.json"


# ---- warehouse bucket: Glue face (non-Iceberg tables, versions, side data, location claims) --

HIVE_PREFIX = CATALOG_PREFIX + "hive/"
ENTRIES_PREFIX = CATALOG_PREFIX + "entries/"
LOCATIONS_PREFIX = CATALOG_PREFIX + "locations/"
LOCATION_CLAIM = "@claim.json"  # "@" sorts before letters and digits and is no name character


def hive_prefix(namespace: Namespace) -> str:
    return f"{HIVE_PREFIX}{ns_id(namespace)}/"


def hive_table(namespace: Namespace, table: str) -> str:
    return f"{hive_prefix(namespace)}{table}.json"


def table_versions_prefix(entry_id: str) -> str:
    return f"{ENTRIES_PREFIX}{entry_id}/versions/"


def table_version(entry_id: str, version: int) -> str:
    return f"{table_versions_prefix(entry_id)}{version:020d}.json"


def entry_side(entry_id: str, what: str) -> str:
    return f"{ENTRIES_PREFIX}{entry_id}/{what}.json"


def location_claim(path: str) -> str:
    """A claim of the earlier layout (one object per location), read once to seed a registry."""
    return f"{LOCATIONS_PREFIX}{path.strip('/')}/{LOCATION_CLAIM}"


def location_registry(path: str) -> str:
    """The client-chosen table locations whose path starts with this one's first segment: only
    those can nest in each other, so one conditional write of this object decides a claim."""
    return f"{LOCATIONS_PREFIX}{path.strip('/').split('/', 1)[0]}.json"


# ---- the listing projection (core/tables/projection.py) --------------------------------------
LISTING_PREFIX = CATALOG_PREFIX + "listing/"
PROJECTION_MARK = "@"  # no table name holds "@" (lowercase letters, digits and "_"), and marks hold a "/"
LISTING_SHARDS = 16  # fixed: a name's shard is crc32(name) % 16 for every release that wrote it


def listing_snapshot(namespace: Namespace) -> str:
    """An earlier release's single snapshot of the names a namespace lists (migrated once, then removed)."""
    return f"{LISTING_PREFIX}{ns_id(namespace)}.json"


def listing_prefix(namespace: Namespace) -> str:
    """Everything of a namespace's listing projection: its marks, shards, completion and scan objects."""
    return f"{LISTING_PREFIX}{ns_id(namespace)}/"


listing_marks_prefix = listing_prefix  # the marks live right under it (the name of earlier releases)


def listing_mark(namespace: Namespace, name: str, ms: int, nonce: str) -> str:
    """A mark: a write at about `ms` may change whether `name` is listed (read it again)."""
    return f"{listing_prefix(namespace)}{name}/{ms:013d}-{nonce}"


def listing_complete(namespace: Namespace, ns_uuid: str) -> str:
    """Present (empty) once the projection of the namespace with this uuid names every listed table."""
    return f"{listing_prefix(namespace)}{PROJECTION_MARK}{ns_uuid}"


def listing_shard(namespace: Namespace, ns_uuid: str, shard: int) -> str:
    return f"{listing_prefix(namespace)}{PROJECTION_MARK}{ns_uuid}.{shard:02d}.json"


def listing_scan(namespace: Namespace, ns_uuid: str) -> str:
    return f"{listing_prefix(namespace)}{PROJECTION_MARK}{ns_uuid}.scan.json"


def listing_object(namespace: Namespace, key: str) -> tuple[str, str, str]:
    """What a key under listing_prefix(namespace) is: ("mark", name, ms), ("complete", uuid, ""),
    ("shard", uuid, "07"), ("scan", uuid, "") or ("other", key, "")."""
    rest = key[len(listing_prefix(namespace)) :]
    if "/" in rest:
        name, stamp = rest.rsplit("/", 1)
        ms = stamp.split("-", 1)[0]
        return ("mark", name, ms) if ms.isdigit() else ("other", key, "")
    if not rest.startswith(PROJECTION_MARK):
        return "other", key, ""
    parts = rest[1:].split(".")
    if len(parts) == 1 and parts[0]:
        return "complete", parts[0], ""
    if len(parts) == 3 and parts[2] == "json" and parts[1].isdigit():
        return "shard", parts[0], parts[1]
    if len(parts) == 3 and parts[1:] == ["scan", "json"]:
        return "scan", parts[0], ""
    return "other", key, ""


ENTRIES_VIEW_SHARDS = 32  # a name's shard is crc32(name) % 32


def entries_view_prefix(namespace: Namespace) -> str:
    """What the writers keep of a one-level namespace's new tables for the Glue face's listings
    (core/tables/entries.py): never authoritative, each entry checked against its pointer's listed ETag."""
    return f"{CATALOG_PREFIX}views/entries/{ns_id(namespace)}/"


def entries_view_shard(namespace: Namespace, shard: int) -> str:
    return f"{entries_view_prefix(namespace)}{shard:02d}.json"


def namespace_of_pointer(key: str) -> Namespace:
    return tuple(key[len(TABLES_PREFIX) :].rsplit("/", 1)[0].split("."))


def view_shard(view: str, namespace: Namespace) -> str:
    return f"{CATALOG_PREFIX}views/{view}/{ns_id(namespace)}.json"


# ---- audit journal (core/primitives/audit.py) and the trash of dropped tables (core/tables/trash.py) -----------
AUDIT_PREFIX = CATALOG_PREFIX + "audit/"  # warehouse bucket: tables, views, namespaces, trash
SYSTEM_AUDIT_PREFIX = "audit/"  # system bucket: warehouses, users, access keys, policies
TRASH_PREFIX = CATALOG_PREFIX + "trash/"


def trash_record(drop_id: str) -> str:
    return f"{TRASH_PREFIX}{drop_id}.json"


FUNCTION_TRASH_PREFIX = CATALOG_PREFIX + "function-trash/"


def function_trash_record(drop_id: str) -> str:
    return f"{FUNCTION_TRASH_PREFIX}{drop_id}.json"


# ---- change events (core/changes/events.py, core/changes/dispatcher.py) -----------------------------------------
EVENTS_PREFIX = CATALOG_PREFIX + "events/"
EVENT_SINKS_PREFIX = EVENTS_PREFIX + "sinks/"


def event_sink(name: str) -> str:
    return f"{EVENT_SINKS_PREFIX}{name}.json"


def event_cursor(sink: str) -> str:
    return f"{EVENTS_PREFIX}cursors/{sink}.json"


def dead_events_prefix(sink: str, sink_uuid: str = "") -> str:
    """A sink's parked events (of the sink with that uuid: a sink made again under the name starts empty)."""
    return f"{EVENTS_PREFIX}dead/{sink}/{sink_uuid + '/' if sink_uuid else ''}"


def dead_event(sink: str, sink_uuid: str, event_id: str) -> str:
    return f"{dead_events_prefix(sink, sink_uuid)}{event_id}.json"


def sink_from_record(key: str) -> str:
    return key[len(EVENT_SINKS_PREFIX) : -len(".json")]


EVENT_FEEDS_PREFIX = EVENTS_PREFIX + "feeds/"


def event_feed(token: str) -> str:
    """Where the events feed (POST /v1/{prefix}/events) keeps what a continuation token has seen."""
    return f"{EVENT_FEEDS_PREFIX}{token}.json"


# ---- server-side scan plans (core/planning/plans.py) --------------------------------------------
PLANS_PREFIX = CATALOG_PREFIX + "plans/"


def plans_prefix(table: str, reader: str) -> str:
    """A reader's plans of one table (both digests: no name reaches a key)."""
    return f"{PLANS_PREFIX}{table}/{reader}/"


def plan_record(table: str, reader: str, plan_id: str) -> str:
    return f"{plans_prefix(table, reader)}{plan_id}/plan.json"


def plan_chunk(table: str, reader: str, plan_id: str, n: int) -> str:
    return f"{plans_prefix(table, reader)}{plan_id}/tasks/{n:06d}.json"
