"""The AWS IAM API for the catalog's identities: `POST /_iam` (query protocol, SigV4 service `iam`).

boto3's `iam` client and `aws iam` with `endpoint_url` at the catalog manage the same users, keys and
policies as `/_iceberg/admin/users` and catalog_admin.py (auth/identities.py: one store, every
change audited), plus roles (auth/roles.py) and OpenID Connect providers (auth/providers.py).
Reserved for the root user, as the admin API is.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

from chalicelib import errors as e
from chalicelib.auth import arns, identities, providers, roles, trust
from chalicelib.auth.identities import signed_in
from chalicelib.core.primitives.context import get_context
from chalicelib.pipeline import RequestContext, RouteGroup, operation
from chalicelib.querywire import Body, Op, QueryFailure, Run, dispatch, face, page, resolve

SERVICE = "iam"
IAM_ERRORS: dict[type[e.CatalogError], tuple[int, str]] = {
    e.BadRequest: (400, "ValidationError"),
    e.MalformedPolicy: (400, "MalformedPolicyDocument"),
    e.UnprocessableEntity: (500, "ServiceFailure"),
    e.Unauthorized: (403, "InvalidClientTokenId"),
    e.Forbidden: (403, "AccessDenied"),
    e.NotFound: (404, "NoSuchEntity"),
    e.MethodNotAllowed: (405, "InvalidAction"),
    e.AlreadyExists: (409, "EntityAlreadyExists"),
    e.DeleteConflict: (409, "DeleteConflict"),
    e.Conflict: (409, "ConcurrentModification"),
    e.ServiceUnavailable: (503, "ServiceFailure"),
}
IAM_FACE = face(SERVICE, IAM_ERRORS)
bp = RouteGroup("iam", IAM_FACE, ["application/x-www-form-urlencoded", "text/plain", "application/json"])
OPS: dict[str, Op] = {}


def op(name: str) -> Callable[[Run], Run]:
    def register(fn: Run) -> Run:
        OPS[name] = Op(fn)
        return fn

    return register


def _resolve(req: RequestContext) -> None:
    resolve(SERVICE, OPS, req)


def _dispatch(req: RequestContext) -> tuple[int, str, dict[str, str]]:
    return dispatch(SERVICE, OPS, req)


operation(bp, "/_iam", "POST", "iam", iceberg=False, resolve=_resolve)(_dispatch)
operation(bp, "/_iam/", "POST", "iam", iceberg=False, resolve=_resolve)(_dispatch)


# ---- shared shapes ------------------------------------------------------------------------------


def _date(text: str | None) -> datetime:
    try:
        return datetime.strptime(str(text), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return datetime(1970, 1, 1, tzinfo=UTC)


def _tags_in(items: list[dict[str, str]] | None) -> dict[str, str]:
    tags: dict[str, str] = {}
    for item in items or []:
        if item["Key"] in tags:
            raise e.BadRequest(f"Duplicate tag key {item['Key'][:128]!r}")
        tags[item["Key"]] = item.get("Value", "")
    return roles.check_tags(tags)


def _tags_out(tags: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in sorted(tags.items())]


def _document(text: str, what: str) -> tuple[Any, int]:
    """A policy document as IAM takes it: JSON text (URL-encoded by some clients)."""
    raw = text if text.lstrip().startswith("{") else unquote(text)
    try:
        return json.loads(raw), len(raw.encode())
    except ValueError:
        raise e.MalformedPolicy(f"{what} is not valid JSON") from None


def _policy_document(text: str) -> tuple[Any, int]:
    doc, size = _document(text, "The policy document")
    try:
        from chalicelib.auth.policy import validate

        validate(doc)
    except e.BadRequest as exc:
        raise e.MalformedPolicy(exc.message) from None
    return doc, size


def _role_shape(role: roles.Role, full: bool = True) -> Body:
    out: Body = {
        "Path": role.path,
        "RoleName": role.name,
        "RoleId": role.role_id,
        "Arn": role.arn,
        "CreateDate": _date(role.created_at),
        "AssumeRolePolicyDocument": json.dumps(role.trust),
        "Description": role.description or None,
        "MaxSessionDuration": role.max_session_s,
    }
    if full:
        out["Tags"] = _tags_out(role.tags) or None
    return out


def _user_shape(user: dict[str, Any], full: bool = True) -> Body:
    name = user["name"]
    out: Body = {
        "Path": "/",
        "UserName": name,
        "UserId": "AIDA" + "".join(c for c in str(user.get("uuid", "")).upper() if c.isalnum())[:17].ljust(17, "0"),
        "Arn": f"arn:aws:iam::{arns.account()}:user/{name}",
        "CreateDate": _date(user.get("created-at")),
    }
    if full:
        out["Tags"] = _tags_out(user.get("tags") or {}) or None
    return out


def _user(name: str) -> dict[str, Any]:
    ctx = get_context()
    record = identities._user_record(ctx, name)  # noqa: SLF001 - its uuid, for UserId
    if record is None:
        raise e.NotFound(f"The user with name {name} cannot be found.")
    return {**identities.public(record[0]), "uuid": record[0].uuid or ""}


def _user_name(value: object) -> str:
    try:
        return identities.check_user(value)
    except e.BadRequest:
        raise e.NotFound(f"The user with name {str(value)[:64]} cannot be found.") from None


# ---- users, access keys, user policies and tags ---------------------------------------------------


@op("CreateUser")
def create_user(req: RequestContext, p: Body) -> Body:
    ctx = get_context()
    if p.get("Path", "/") != "/" or p.get("PermissionsBoundary"):
        raise e.BadRequest("Users here have the path / and no permissions boundary")
    tags = _tags_in(p.get("Tags"))
    try:
        identities.create_user(ctx, p["UserName"])
    except e.Conflict:
        raise e.AlreadyExists(f"User with name {p['UserName']} already exists.") from None
    if tags:
        identities.tag_user(ctx, p["UserName"], tags)
    return {"User": _user_shape(_user(p["UserName"]))}


@op("GetUser")
def get_user(req: RequestContext, p: Body) -> Body:
    name = p.get("UserName")
    if name is None:  # the caller itself
        principal = signed_in(req.identity)
        if principal.is_root or principal.kind != "user":
            who = principal.arn
            return {
                "User": {
                    "Path": "/",
                    "UserName": "root",
                    "UserId": arns.account(),
                    "Arn": who,
                    "CreateDate": _date(None),
                }
            }
        name = principal.name
    return {"User": _user_shape(_user(_user_name(name)))}


@op("ListUsers")
def list_users(req: RequestContext, p: Body) -> Body:
    if p.get("PathPrefix", "/") != "/":
        return {"Users": [], "IsTruncated": False}
    names, marker = page(identities.list_users(get_context()), p.get("Marker"), p.get("MaxItems"))
    users = []
    for name in names:
        try:
            users.append(_user_shape(_user(name), full=False))
        except (e.NotFound, e.DamagedObject):
            continue
    return {"Users": users, "IsTruncated": marker is not None, "Marker": marker}


@op("DeleteUser")
def delete_user(req: RequestContext, p: Body) -> Body:
    user = _user(_user_name(p["UserName"]))
    if user["access-keys"] or user["policies"]:
        raise e.DeleteConflict("Cannot delete entity, must delete access keys and policies first.")
    identities.delete_user(get_context(), user["name"])
    return {}


@op("CreateAccessKey")
def create_access_key(req: RequestContext, p: Body) -> Body:
    name = p.get("UserName")
    if name is None:
        raise e.BadRequest("UserName is required: root's keys are the deployment's, not made here")
    _user(_user_name(name))
    if len(_user(name)["access-keys"]) >= 2:
        raise QueryFailure("LimitExceeded", "Cannot exceed quota for AccessKeysPerUser: 2", 409)
    key = identities.create_access_key(get_context(), name)
    created = identities.access_key_created(get_context(), key["access-key-id"])
    return {
        "AccessKey": {
            "UserName": name,
            "AccessKeyId": key["access-key-id"],
            "Status": "Active",
            "SecretAccessKey": key["secret-access-key"],
            "CreateDate": _date(created),
        }
    }


@op("ListAccessKeys")
def list_access_keys(req: RequestContext, p: Body) -> Body:
    name = p.get("UserName") or (req.identity.name if req.identity is not None else "")
    user = _user(_user_name(name))
    ctx = get_context()
    keys = [
        {
            "UserName": user["name"],
            "AccessKeyId": akid,
            "Status": "Active",
            "CreateDate": _date(identities.access_key_created(ctx, akid)),
        }
        for akid in user["access-keys"]
    ]
    return {"AccessKeyMetadata": keys, "IsTruncated": False}


@op("DeleteAccessKey")
def delete_access_key(req: RequestContext, p: Body) -> Body:
    name = _user_name(p.get("UserName"))
    akid = p["AccessKeyId"]
    if akid not in _user(name)["access-keys"]:
        raise e.NotFound(f"The Access Key with id {akid[:128]} cannot be found.")
    identities.delete_access_key(get_context(), name, akid)
    return {}


@op("PutUserPolicy")
def put_user_policy(req: RequestContext, p: Body) -> Body:
    name = _user_name(p["UserName"])
    doc, size = _policy_document(p["PolicyDocument"])
    _user(name)
    identities.put_policy(get_context(), name, p["PolicyName"], doc, size)
    return {}


@op("GetUserPolicy")
def get_user_policy(req: RequestContext, p: Body) -> Body:
    user = _user(_user_name(p["UserName"]))
    doc = user["policies"].get(p["PolicyName"])
    if doc is None:
        raise e.NotFound(f"The user policy with name {p['PolicyName']} cannot be found.")
    return {"UserName": user["name"], "PolicyName": p["PolicyName"], "PolicyDocument": json.dumps(doc)}


@op("DeleteUserPolicy")
def delete_user_policy(req: RequestContext, p: Body) -> Body:
    name = _user_name(p["UserName"])
    if p["PolicyName"] not in _user(name)["policies"]:
        raise e.NotFound(f"The user policy with name {p['PolicyName']} cannot be found.")
    identities.delete_policy(get_context(), name, p["PolicyName"])
    return {}


@op("ListUserPolicies")
def list_user_policies(req: RequestContext, p: Body) -> Body:
    names, marker = page(list(_user(_user_name(p["UserName"]))["policies"]), p.get("Marker"), p.get("MaxItems"))
    return {"PolicyNames": names, "IsTruncated": marker is not None, "Marker": marker}


@op("ListAttachedUserPolicies")
def list_attached_user_policies(req: RequestContext, p: Body) -> Body:
    _user(_user_name(p["UserName"]))  # managed policies do not exist here: inline ones only
    return {"AttachedPolicies": [], "IsTruncated": False}


@op("TagUser")
def tag_user(req: RequestContext, p: Body) -> Body:
    name = _user_name(p["UserName"])
    tags = _tags_in(p["Tags"])
    _user(name)
    identities.tag_user(get_context(), name, tags)
    return {}


@op("UntagUser")
def untag_user(req: RequestContext, p: Body) -> Body:
    name = _user_name(p["UserName"])
    _user(name)
    identities.untag_user(get_context(), name, list(p["TagKeys"]))
    return {}


@op("ListUserTags")
def list_user_tags(req: RequestContext, p: Body) -> Body:
    return {"Tags": _tags_out(_user(_user_name(p["UserName"]))["tags"]), "IsTruncated": False}


# ---- roles --------------------------------------------------------------------------------------


def _role_name(value: object) -> str:
    try:
        return roles.check_name(value)
    except e.BadRequest:
        raise e.NotFound(f"The role with name {str(value)[:64]} cannot be found.") from None


def _principal_exists(arn: str) -> bool:
    """A trust policy's AWS principal: a user or role of this catalog (IAM refuses unknown ones)."""
    from chalicelib.auth import front_door

    ctx = get_context()
    name = arn.rsplit("/", 1)[-1]
    if front_door.enabled() and ":assumed-role/" not in arn:
        return True  # AWS's own users and roles stand in front of the function: they exist there
    try:
        if ":user/" in arn:
            return identities._user_record(ctx, name) is not None  # noqa: SLF001
        return roles.load(ctx, name) is not None
    except e.CatalogError:
        return False


def _trust_document(text: str) -> tuple[dict[str, Any], int]:
    doc, size = _document(text, "The trust policy")
    if size > roles.MAX_TRUST_BYTES:
        raise QueryFailure("LimitExceeded", f"Cannot exceed quota for ACLSizePerRole: {roles.MAX_TRUST_BYTES}", 409)
    trust.validate(doc, _principal_exists)
    return doc, size


@op("CreateRole")
def create_role(req: RequestContext, p: Body) -> Body:
    doc, _ = _trust_document(p["AssumeRolePolicyDocument"])
    if p.get("PermissionsBoundary"):
        raise e.BadRequest("Permissions boundaries are not supported here")
    role = roles.create(
        get_context(),
        p["RoleName"],
        doc,
        path=p.get("Path", "/"),
        description=p.get("Description", ""),
        max_session_s=p.get("MaxSessionDuration", roles.DEFAULT_SESSION_S),
        tags=_tags_in(p.get("Tags")),
    )
    return {"Role": _role_shape(role)}


@op("GetRole")
def get_role(req: RequestContext, p: Body) -> Body:
    return {"Role": _role_shape(roles.get(get_context(), _role_name(p["RoleName"])))}


@op("ListRoles")
def list_roles(req: RequestContext, p: Body) -> Body:
    ctx = get_context()
    prefix = p.get("PathPrefix", "/")
    found = []
    for name in roles.names(ctx):
        try:
            role = roles.get(ctx, name)
        except (e.NotFound, e.DamagedObject):
            continue
        if role.path.startswith(prefix):
            found.append(role)
    by_name = {r.name: r for r in found}
    names, marker = page(list(by_name), p.get("Marker"), p.get("MaxItems"))
    return {
        "Roles": [_role_shape(by_name[n], full=False) for n in names],
        "IsTruncated": marker is not None,
        "Marker": marker,
    }


@op("DeleteRole")
def delete_role(req: RequestContext, p: Body) -> Body:
    roles.delete(get_context(), _role_name(p["RoleName"]))
    return {}


@op("UpdateAssumeRolePolicy")
def update_assume_role_policy(req: RequestContext, p: Body) -> Body:
    name = _role_name(p["RoleName"])
    doc, size = _trust_document(p["PolicyDocument"])
    roles.set_trust(get_context(), name, doc, size)
    return {}


@op("UpdateRole")
def update_role(req: RequestContext, p: Body) -> Body:
    roles.set_properties(
        get_context(),
        _role_name(p["RoleName"]),
        description=p.get("Description"),
        max_session_s=p.get("MaxSessionDuration"),
    )
    return {}


@op("UpdateRoleDescription")
def update_role_description(req: RequestContext, p: Body) -> Body:
    name = _role_name(p["RoleName"])
    roles.set_properties(get_context(), name, description=p["Description"])
    return {"Role": _role_shape(roles.get(get_context(), name))}


@op("PutRolePolicy")
def put_role_policy(req: RequestContext, p: Body) -> Body:
    name = _role_name(p["RoleName"])
    doc, size = _policy_document(p["PolicyDocument"])
    roles.put_policy(get_context(), name, p["PolicyName"], doc, size)
    return {}


@op("GetRolePolicy")
def get_role_policy(req: RequestContext, p: Body) -> Body:
    role = roles.get(get_context(), _role_name(p["RoleName"]))
    doc = role.policies.get(p["PolicyName"])
    if doc is None:
        raise e.NotFound(f"The role policy with name {p['PolicyName']} cannot be found.")
    return {"RoleName": role.name, "PolicyName": p["PolicyName"], "PolicyDocument": json.dumps(doc)}


@op("DeleteRolePolicy")
def delete_role_policy(req: RequestContext, p: Body) -> Body:
    roles.delete_policy(get_context(), _role_name(p["RoleName"]), p["PolicyName"])
    return {}


@op("ListRolePolicies")
def list_role_policies(req: RequestContext, p: Body) -> Body:
    role = roles.get(get_context(), _role_name(p["RoleName"]))
    names, marker = page(list(role.policies), p.get("Marker"), p.get("MaxItems"))
    return {"PolicyNames": names, "IsTruncated": marker is not None, "Marker": marker}


@op("ListAttachedRolePolicies")
def list_attached_role_policies(req: RequestContext, p: Body) -> Body:
    roles.get(get_context(), _role_name(p["RoleName"]))  # inline policies only: none attached
    return {"AttachedPolicies": [], "IsTruncated": False}


@op("TagRole")
def tag_role(req: RequestContext, p: Body) -> Body:
    roles.tag(get_context(), _role_name(p["RoleName"]), _tags_in(p["Tags"]))
    return {}


@op("UntagRole")
def untag_role(req: RequestContext, p: Body) -> Body:
    roles.untag(get_context(), _role_name(p["RoleName"]), list(p["TagKeys"]))
    return {}


@op("ListRoleTags")
def list_role_tags(req: RequestContext, p: Body) -> Body:
    return {"Tags": _tags_out(roles.get(get_context(), _role_name(p["RoleName"])).tags), "IsTruncated": False}


# ---- OpenID Connect providers -------------------------------------------------------------------


def _provider_shape(provider: providers.Provider) -> Body:
    return {
        "Url": provider.host_path,
        "ClientIDList": list(provider.client_ids),
        "ThumbprintList": list(provider.thumbprints),
        "CreateDate": _date(provider.created_at),
        "Tags": _tags_out(provider.tags),
    }


def _provider_arn(value: object) -> str:
    try:
        providers.name_of(str(value))
    except e.BadRequest:
        raise e.NotFound(f"OpenIDConnect Provider not found for arn {str(value)[:200]}") from None
    return str(value)


@op("CreateOpenIDConnectProvider")
def create_oidc_provider(req: RequestContext, p: Body) -> Body:
    provider = providers.create(
        get_context(), p["Url"], p.get("ClientIDList"), p.get("ThumbprintList"), _tags_in(p.get("Tags"))
    )
    return {"OpenIDConnectProviderArn": provider.arn, "Tags": _tags_out(provider.tags)}


@op("GetOpenIDConnectProvider")
def get_oidc_provider(req: RequestContext, p: Body) -> Body:
    return _provider_shape(providers.get(get_context(), _provider_arn(p["OpenIDConnectProviderArn"])))


@op("ListOpenIDConnectProviders")
def list_oidc_providers(req: RequestContext, p: Body) -> Body:
    account = arns.account()
    names = sorted(providers.names(get_context()))
    return {"OpenIDConnectProviderList": [{"Arn": f"arn:aws:iam::{account}:oidc-provider/{n}"} for n in names]}


@op("DeleteOpenIDConnectProvider")
def delete_oidc_provider(req: RequestContext, p: Body) -> Body:
    providers.delete(get_context(), _provider_arn(p["OpenIDConnectProviderArn"]))
    return {}


@op("AddClientIDToOpenIDConnectProvider")
def add_client_id(req: RequestContext, p: Body) -> Body:
    providers.add_client_id(get_context(), _provider_arn(p["OpenIDConnectProviderArn"]), p["ClientID"])
    return {}


@op("RemoveClientIDFromOpenIDConnectProvider")
def remove_client_id(req: RequestContext, p: Body) -> Body:
    providers.remove_client_id(get_context(), _provider_arn(p["OpenIDConnectProviderArn"]), p["ClientID"])
    return {}


@op("UpdateOpenIDConnectProviderThumbprint")
def update_thumbprints(req: RequestContext, p: Body) -> Body:
    providers.set_thumbprints(get_context(), _provider_arn(p["OpenIDConnectProviderArn"]), p["ThumbprintList"])
    return {}


@op("TagOpenIDConnectProvider")
def tag_oidc_provider(req: RequestContext, p: Body) -> Body:
    providers.tag(get_context(), _provider_arn(p["OpenIDConnectProviderArn"]), _tags_in(p["Tags"]))
    return {}


@op("UntagOpenIDConnectProvider")
def untag_oidc_provider(req: RequestContext, p: Body) -> Body:
    providers.untag(get_context(), _provider_arn(p["OpenIDConnectProviderArn"]), list(p["TagKeys"]))
    return {}


@op("ListOpenIDConnectProviderTags")
def list_oidc_provider_tags(req: RequestContext, p: Body) -> Body:
    provider = providers.get(get_context(), _provider_arn(p["OpenIDConnectProviderArn"]))
    return {"Tags": _tags_out(provider.tags), "IsTruncated": False}
