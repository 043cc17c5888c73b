"""The broker's RocketMQ 5 users and ACLs, kept in one file that a crash cannot tear.

Each change is checked, written whole (``write_json_atomically``: the old or
the new file, never half), and then handed to ``on_change`` (the gate), so
it applies to the next request without a restart. The file holds the
passwords, which a signature check needs in clear (HMAC), so it is made
readable by its owner only; nothing the store returns to an admin carries
one (``User.to_json(with_password=False)``).

Rules after RocketMQ 5.3 (rocketmq-all-5.3.3 ``auth/.../authentication/manager/
AuthenticationMetadataManagerImpl.java`` and ``auth/.../authorization/
manager/AuthorizationMetadataManagerImpl.java``): a user is created once
(``UserExists``) and updated only if it exists; deleting a user that does
not exist changes nothing and is no error; an ACL needs its user; creating
*or updating* an ACL merges the entries into the subject's ACL, made if
missing (an entry for the same resource is replaced); deleting with a
resource removes that entry, without one the whole ACL, and needs the ACL
to exist. Deleting a user deletes its ACL (``deleteUser`` deletes both).
tidemq adds: the last enabled Super user cannot be deleted, demoted or
disabled (that would lock every administrator out).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from tidemq.common.atomic_file import write_json_atomically

from .auth_model import (
    Acl,
    AuthModelError,
    AuthState,
    PolicyEntry,
    Resource,
    User,
    UserStatus,
    UserType,
    subject_of,
)

__all__ = ["AclNotFound", "AuthNotFound", "AuthStore", "UserExists", "UserNotFound"]

FILE_NAME = "auth.json"


class AuthNotFound(AuthModelError):
    """The user or ACL named does not exist."""


class UserNotFound(AuthNotFound):
    pass


class AclNotFound(AuthNotFound):
    pass


class UserExists(AuthModelError):
    """A user of that name exists already."""


class AuthStore:
    """Users and ACLs in `path`; `state` is what is in force."""

    def __init__(self, path: Path, on_change: Callable[[AuthState], None] | None = None) -> None:
        self.path = path
        self.on_change = on_change
        self.state = self._load()

    def _load(self) -> AuthState:
        try:
            document = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            return AuthState()
        except (OSError, ValueError) as exc:
            raise AuthModelError(f"{self.path}: cannot be read: {exc}") from None
        try:
            users = [User.from_json(u) for u in document.get("users") or ()]
            acls = [Acl.from_json(a) for a in document.get("acls") or ()]
        except (AuthModelError, AttributeError, TypeError) as exc:
            raise AuthModelError(f"{self.path}: {exc}") from None
        return AuthState({u.username: u for u in users}, {a.subject: a for a in acls})

    def _save(self, state: AuthState) -> None:
        document = {
            "users": [u.to_json(with_password=True) for u in state.users.values()],
            "acls": [a.to_json() for a in state.acls.values()],
        }
        write_json_atomically(self.path, document)
        with contextlib.suppress(OSError):
            os.chmod(self.path, 0o600)
        self.state = state
        if self.on_change is not None:
            self.on_change(state)

    # -- users ---------------------------------------------------------------------------

    def create_user(self, user: User) -> None:
        if user.username in self.state.users:
            raise UserExists(f"user {user.username} already exists")
        self._save(AuthState({**self.state.users, user.username: user}, self.state.acls))

    def update_user(
        self,
        username: str,
        *,
        password: str | None = None,
        user_type: UserType | None = None,
        status: UserStatus | None = None,
    ) -> User:
        old = self.get_user(username)
        new = User(
            username,
            password or old.password,
            user_type or old.user_type,
            status or old.status,
        )
        if not (new.is_super and new.enabled):
            self._keep_a_super(username)
        self._save(AuthState({**self.state.users, username: new}, self.state.acls))
        return new

    def delete_user(self, username: str) -> bool:
        """Delete `username` and its ACL; False (nothing changed) when there is no such user."""
        if self.state.user(username) is None:
            return False
        self._keep_a_super(username)
        users = {k: v for k, v in self.state.users.items() if k != username}
        acls = {k: v for k, v in self.state.acls.items() if k != subject_of(username)}
        self._save(AuthState(users, acls))
        return True

    def _keep_a_super(self, leaving: str) -> None:
        others = [
            u
            for u in self.state.users.values()
            if u.username != leaving and u.is_super and u.enabled
        ]
        old = self.state.users[leaving]
        if old.is_super and old.enabled and not others:
            raise AuthModelError(
                f"user {leaving} is the last enabled Super user: create another one first"
            )

    def get_user(self, username: str) -> User:
        user = self.state.user(username)
        if user is None:
            raise UserNotFound(f"user {username} does not exist")
        return user

    def list_users(self, name_filter: str | None = None) -> list[User]:
        """ListUser: the users whose name contains `name_filter`, by name."""
        return sorted(
            (u for u in self.state.users.values() if not name_filter or name_filter in u.username),
            key=lambda u: u.username,
        )

    # -- ACLs ----------------------------------------------------------------------------

    def _subject_user(self, subject: str) -> str:
        subject = subject_of(subject)
        username = subject.partition(":")[2]
        if username not in self.state.users:
            raise UserNotFound(
                f"the subject {subject} does not exist: create user {username} first"
            )
        return subject

    def create_acl(self, subject: str, entries: Iterable[PolicyEntry]) -> Acl:
        """A new ACL, or more entries for an existing one (merged by resource)."""
        subject = self._subject_user(subject)
        entries = list(entries)
        if not entries:
            raise AuthModelError(f"no policy entry for {subject}")
        old = self.state.acls.get(subject, Acl(subject, ()))
        return self._put(old.merged(entries))

    def update_acl(self, subject: str, entries: Iterable[PolicyEntry]) -> Acl:
        """As `create_acl`: RocketMQ's updateAcl also makes the ACL when it is missing."""
        return self.create_acl(subject, entries)

    def delete_acl(self, subject: str, resources: Iterable[str] = ()) -> None:
        self._subject_user(subject)
        old = self.get_acl(subject)
        gone = [Resource.parse(r) for r in resources]
        acls = dict(self.state.acls)
        if gone:
            acls[old.subject] = old.without(gone)
        else:
            del acls[old.subject]
        self._save(AuthState(self.state.users, acls))

    def _put(self, acl: Acl) -> Acl:
        self._save(AuthState(self.state.users, {**self.state.acls, acl.subject: acl}))
        return acl

    def get_acl(self, subject: str) -> Acl:
        subject = subject_of(subject)
        acl = self.state.acls.get(subject)
        if acl is None:
            raise AclNotFound(f"no ACL for {subject}")
        return acl

    def list_acls(
        self, subject_filter: str | None = None, resource_filter: str | None = None
    ) -> list[Acl]:
        """ListAcl: subjects containing `subject_filter`, entries whose resource contains
        `resource_filter` (an ACL left without entries is not listed)."""
        found: list[Acl] = []
        for acl in sorted(self.state.acls.values(), key=lambda a: a.subject):
            if subject_filter and subject_filter not in acl.subject:
                continue
            entries = tuple(
                e for e in acl.entries if not resource_filter or resource_filter in e.resource.key
            )
            if entries or not resource_filter:
                found.append(Acl(acl.subject, entries))
        return found
