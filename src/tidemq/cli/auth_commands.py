"""`tidemq user ...` and `tidemq acl ...`: the RocketMQ 5 users and ACLs a broker stores.

Each change goes to every master broker (mqadmin's ``-c CLUSTER``), a read
comes from one; get and list show what mqadmin's getUser / listUser /
getAcl / listAcl show, less the password, which tidemq never sends back.
With access control on, these need an admin: a Super user, a plain_acl.yml
``admin: true`` account, or a user allowed the action on ``Cluster``
(Update to change, Get to read; only a Super user may make, change or
delete a Super user); give its keys with --access-key / --secret-key as for
every cluster command.

What they print: a line saying what was done and where (with --json an
object with ``result``); a failure is one line, "cannot create user alice:
The user is existed", with the broker's remark (RocketMQ's texts,
tidemq.broker.auth_admin) and a non-zero exit, with --json ``{"error":
..., "code": 16, "code_name": "NO_PERMISSION"}``. mqadmin prints "create
user to ADDR success." and, on a failure, a stack trace with exit code 0
(rocketmq-all-5.3.3 ``tools/.../command/auth/*SubCommand.java``,
``MQAdminStartup``). RocketMQ's broker answers SUCCESS to deleting a user
that is not there, and to reading one: ``user delete`` then says nothing
was deleted (exit 0), ``user get`` / ``acl get`` fail with USER_NOT_EXIST /
POLICY_NOT_EXIST (RocketMQ's codes for it, which its broker never sends).
"""

from __future__ import annotations

from typing import Any

import click

from tidemq.acl.auth_model import (
    Action,
    AuthModelError,
    Decision,
    PolicyEntry,
    UserStatus,
    UserType,
    subject_of,
)
from tidemq.cli.output import emit
from tidemq.cli.plumbing import abort, admin_options, run_admin
from tidemq.protocol.codes import ResponseCode

__all__ = ["AUTH_COMMANDS"]

_TYPES = click.Choice([t.value for t in UserType], case_sensitive=False)
_STATUSES = click.Choice([s.value for s in UserStatus], case_sensitive=False)
_ACTIONS = click.Choice([a.value for a in Action if a is not Action.ANY], case_sensitive=False)
_DECISIONS = click.Choice([d.value for d in Decision], case_sensitive=False)


def _canonical(kind: Any, text: str | None) -> str | None:
    if text is None:
        return None
    return next(m.value for m in kind if m.value.lower() == text.lower())  # type: ignore[no-any-return]


# -- user ------------------------------------------------------------------------------


@click.group("user")
def user_group() -> None:
    """Create, change, delete and list RocketMQ 5 users (username = access key)."""


@user_group.command("create")
@click.argument("username")
@click.option(
    "--password",
    envvar="TIDEMQ_USER_PASSWORD",
    show_envvar=True,
    required=True,
    help="The user's secret key (it signs with it).",
)
@click.option("--type", "user_type", type=_TYPES, default="Normal", show_default=True)
@click.option("--status", type=_STATUSES, default="enable", show_default=True)
@admin_options
def user_create(
    username: str, password: str, user_type: str, status: str, namesrv: list[str], as_json: bool
) -> None:
    """Create user USERNAME on every master broker."""
    brokers = run_admin(
        namesrv,
        lambda a: a.create_user(
            username,
            password,
            user_type=_canonical(UserType, user_type) or "Normal",
            status=_canonical(UserStatus, status) or "enable",
        ),
        failing=f"cannot create user {username}",
    )
    _done("created", {"user": username}, brokers, as_json, f"user {username} created")


@user_group.command("update")
@click.argument("username")
@click.option("--password", envvar="TIDEMQ_USER_PASSWORD", show_envvar=True, default=None)
@click.option("--type", "user_type", type=_TYPES, default=None)
@click.option("--status", type=_STATUSES, default=None)
@admin_options
def user_update(
    username: str,
    password: str | None,
    user_type: str | None,
    status: str | None,
    namesrv: list[str],
    as_json: bool,
) -> None:
    """Change USERNAME's password, type or status (what is not given stays)."""
    if password is None and user_type is None and status is None:
        abort("nothing to change: give --password, --type or --status")
    brokers = run_admin(
        namesrv,
        lambda a: a.update_user(
            username,
            password=password,
            user_type=_canonical(UserType, user_type),
            status=_canonical(UserStatus, status),
        ),
        failing=f"cannot update user {username}",
    )
    _done("updated", {"user": username}, brokers, as_json, f"user {username} updated")


@user_group.command("delete")
@click.argument("username")
@admin_options
def user_delete(username: str, namesrv: list[str], as_json: bool) -> None:
    """Delete USERNAME (and its ACL); one that does not exist is no error."""
    brokers = run_admin(
        namesrv, lambda a: a.delete_user(username), failing=f"cannot delete user {username}"
    )
    if brokers:
        _done("deleted", {"user": username}, brokers, as_json, f"user {username} deleted")
    else:
        text = f"user {username} does not exist: nothing deleted"
        _done("not found", {"user": username}, brokers, as_json, text)


@user_group.command("get")
@click.argument("username")
@admin_options
def user_get(username: str, namesrv: list[str], as_json: bool) -> None:
    """Show USERNAME's type and status (never its password)."""
    user = run_admin(
        namesrv, lambda a: a.get_user(username), failing=f"cannot read user {username}"
    )
    if user is None:
        abort(f"user {username} does not exist", ResponseCode.USER_NOT_EXIST)
    if as_json:
        emit(user, as_json=True)
    else:
        emit([_user_row(user)], as_json=False)


@user_group.command("list")
@click.option("--filter", "name_filter", default=None, help="Only names containing this.")
@admin_options
def user_list(name_filter: str | None, namesrv: list[str], as_json: bool) -> None:
    """List the users (never their passwords)."""
    users = run_admin(namesrv, lambda a: a.list_users(name_filter), failing="cannot list users")
    if as_json:
        emit(users, as_json=True)
    elif users:
        rows = [_user_row(u) for u in users]
        emit(rows, as_json=False, title=f"{len(rows)} users")
    else:
        click.echo("no users")


def _user_row(user: dict[str, Any]) -> dict[str, Any]:
    return {
        "user": user.get("username"),
        "type": user.get("userType"),
        "status": user.get("userStatus"),
    }


def _done(result: str, what: dict[str, Any], brokers: list[str], as_json: bool, text: str) -> None:
    """One line for people ("user alice created on broker-a"), an object for programs."""
    if as_json:
        emit({"result": result, **what, "brokers": brokers}, as_json=True)
    else:
        click.echo(f"{text} on {', '.join(brokers)}" if brokers else text)


# -- acl -------------------------------------------------------------------------------


@click.group("acl")
def acl_group() -> None:
    """Create, change, delete and list RocketMQ 5 ACLs (a user's policy entries)."""


def _entry_options(command: Any) -> Any:
    command = click.option("--decision", type=_DECISIONS, default="Allow", show_default=True)(
        command
    )
    command = click.option(
        "--source-ip",
        "source_ips",
        multiple=True,
        help="Only from this address or CIDR (repeatable; default any).",
    )(command)
    command = click.option(
        "--action",
        "actions",
        type=_ACTIONS,
        multiple=True,
        required=True,
        help="Pub, Sub, Create, Update, Delete, Get, List or All (repeatable).",
    )(command)
    return click.option(
        "--resource",
        "resources",
        multiple=True,
        required=True,
        help="Topic:NAME, Topic:PREFIX*, Group:NAME, Group:*, Cluster or * (repeatable).",
    )(command)


def _entries(
    resources: tuple[str, ...], actions: tuple[str, ...], source_ips: tuple[str, ...], decision: str
) -> list[dict[str, Any]]:
    try:
        return [PolicyEntry.build(r, actions, decision, source_ips).to_json() for r in resources]
    except AuthModelError as exc:
        abort(str(exc))


def _subject(text: str) -> str:
    try:
        return subject_of(text)
    except AuthModelError as exc:
        abort(str(exc))


def _acl_write(
    subject: str,
    resources: tuple[str, ...],
    actions: tuple[str, ...],
    source_ips: tuple[str, ...],
    decision: str,
    namesrv: list[str],
    as_json: bool,
    *,
    update: bool,
) -> None:
    subject = _subject(subject)
    entries = _entries(resources, actions, source_ips, decision)
    verb = "update" if update else "create"
    brokers = run_admin(
        namesrv,
        lambda a: a.create_acl(subject, entries, update=update),
        failing=f"cannot {verb} the ACL of {subject}",
    )
    what = {"subject": subject, "entries": len(entries)}
    _done(f"{verb}d", what, brokers, as_json, f"ACL of {subject} {verb}d ({len(entries)} entries)")


@acl_group.command("create")
@click.argument("subject")
@_entry_options
@admin_options
def acl_create(
    subject: str,
    resources: tuple[str, ...],
    actions: tuple[str, ...],
    source_ips: tuple[str, ...],
    decision: str,
    namesrv: list[str],
    as_json: bool,
) -> None:
    """Give SUBJECT (User:NAME, or NAME) an entry per --resource; an entry for a
    resource it already has is replaced."""
    _acl_write(subject, resources, actions, source_ips, decision, namesrv, as_json, update=False)


@acl_group.command("update")
@click.argument("subject")
@_entry_options
@admin_options
def acl_update(
    subject: str,
    resources: tuple[str, ...],
    actions: tuple[str, ...],
    source_ips: tuple[str, ...],
    decision: str,
    namesrv: list[str],
    as_json: bool,
) -> None:
    """Replace or add SUBJECT's entries for these resources (as create: RocketMQ's
    update also makes a missing ACL)."""
    _acl_write(subject, resources, actions, source_ips, decision, namesrv, as_json, update=True)


@acl_group.command("delete")
@click.argument("subject")
@click.option("--resource", default=None, help="Only this resource's entry.")
@admin_options
def acl_delete(subject: str, resource: str | None, namesrv: list[str], as_json: bool) -> None:
    """Delete SUBJECT's ACL, or only its entry for --resource."""
    subject = _subject(subject)
    what = f"the entry for {resource} of {subject}" if resource else f"the ACL of {subject}"
    brokers = run_admin(
        namesrv, lambda a: a.delete_acl(subject, resource), failing=f"cannot delete {what}"
    )
    shown = {"subject": subject, **({"resource": resource} if resource else {})}
    _done("deleted", shown, brokers, as_json, f"{what[0].upper()}{what[1:]} deleted")


@acl_group.command("get")
@click.argument("subject")
@admin_options
def acl_get(subject: str, namesrv: list[str], as_json: bool) -> None:
    """Show SUBJECT's ACL, one row per entry."""
    subject = _subject(subject)
    acl = run_admin(
        namesrv, lambda a: a.get_acl(subject), failing=f"cannot read the ACL of {subject}"
    )
    if acl is None:
        abort(f"{subject} has no ACL", ResponseCode.POLICY_NOT_EXIST)
    if as_json:
        emit(acl, as_json=True)
    else:
        emit(_acl_rows([acl]), as_json=False, title=f"ACL of {subject}")


@acl_group.command("list")
@click.option("--subject", "subject_filter", default=None, help="Subjects containing this.")
@click.option("--resource", "resource_filter", default=None, help="Resources containing this.")
@admin_options
def acl_list(
    subject_filter: str | None, resource_filter: str | None, namesrv: list[str], as_json: bool
) -> None:
    """List the ACLs, one row per entry (mqadmin listAcl's columns)."""
    acls = run_admin(
        namesrv, lambda a: a.list_acls(subject_filter, resource_filter), failing="cannot list ACLs"
    )
    if as_json:
        emit(acls, as_json=True)
        return
    rows = _acl_rows(acls)
    if rows:
        emit(rows, as_json=False, title=f"{len(rows)} ACL entries")
    else:
        click.echo("no ACLs")


def _acl_rows(acls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "subject": acl.get("subject"),
            "policy": policy.get("policyType"),
            "resource": entry.get("resource"),
            "actions": ",".join(entry.get("actions") or ()),
            "source_ips": ",".join(entry.get("sourceIps") or ()) or "*",
            "decision": entry.get("decision"),
        }
        for acl in acls
        for policy in acl.get("policies") or ()
        for entry in policy.get("entries") or ()
    ]


AUTH_COMMANDS: tuple[click.Command, ...] = (user_group, acl_group)
