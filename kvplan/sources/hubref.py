"""A Hugging Face Hub model reference, `hf:org/name[@revision]` or a bare `org/name[@rev]`,
read and checked without the Hub client or the rest of kvplan.sources.hub (resolving a MODEL
argument asks only whether it is one: a library alias is found without fetching anything).
kvplan.sources.hub re-exports these names.
"""

from __future__ import annotations

import re

from kvplan.core.errors import BadInputError
from kvplan.core.patterns import lazy
from kvplan.core.record import record

DEFAULT_REVISION = "main"  # the client's default branch (huggingface_hub.constants)
# A branch, tag or commit name: no path separator, no `..`, not hidden, at most 128
# characters; or a pull request's ref (`refs/pr/12`), which the Hub names that way. Compiled
# on first use: most MODEL arguments name no revision.
_REVISION = lazy(r"[A-Za-z0-9_][A-Za-z0-9._+-]{0,127}|refs/pr/[0-9]{1,9}")
# Hub repo ids: `name` or `org/name`, letters, digits, `-`, `_`, `.`; no `--` or `..`.
_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*(?:/[A-Za-z0-9][\w.-]*)?")


@record
class HubRef:
    """A model repo on the Hub and the revision asked for (None: the default branch)."""

    repo: str
    revision: str | None = None

    @property
    def rev(self) -> str:
        return self.revision or DEFAULT_REVISION

    @property
    def name(self) -> str:
        """The spec name: the repo's last part, lower case (`Llama-3.1-8B` -> `llama-3.1-8b`)."""
        return self.repo.rsplit("/", 1)[-1].lower()

    def __str__(self) -> str:
        return f"hf:{self.repo}@{self.rev}"


def parse_hub_ref(model: str) -> HubRef:
    """`hf:org/name@rev`, `hf:name`, `org/name@rev`, `org/name` -> HubRef, or BadInputError."""
    ref = _hub_ref(model)
    if ref is not None:
        check_revision(ref, model)
    if ref is None:
        raise BadInputError(f"{model!r} is not a Hugging Face Hub model id",
                            "write hf:org/name, optionally with @branch, @tag or "
                            "@commit-sha, e.g. hf:meta-llama/Llama-3.1-8B@main")
    return ref


def bare_hub_ref(model: str) -> HubRef | None:
    """An unprefixed `org/name[@rev]` -> HubRef; None for anything else (a bare `gpt2` is a
    library name, `./x/y` a path). A repo id with a revision that is not a branch, tag or
    commit name is refused (BadInputError), never sent."""
    ref = None if model.startswith("hf:") else _hub_ref(model)
    if ref is not None:
        check_revision(ref, model)
    return ref


def check_revision(ref: HubRef, model: str) -> None:
    """A revision kvplan may send and name a file after: a branch, tag or commit name."""
    rev = ref.revision
    if rev is None or (_REVISION.fullmatch(rev) and ".." not in rev
                       and not rev.endswith(".lock")):
        return
    shown = rev if len(rev) <= 60 else rev[:57] + "..."
    raise BadInputError(f"{model[:200]!r}: {shown!r} is not a branch, tag or commit name",
                        "a revision is letters, digits, '.', '_', '-' and '+' (no '/' or "
                        "'..'), or a 40-digit commit sha, e.g. hf:org/name@main")


def _hub_ref(model: str) -> HubRef | None:
    prefixed = model.startswith("hf:")
    body = model[3:] if prefixed else model
    repo, at, revision = body.partition("@")
    valid = (_REPO_ID.fullmatch(repo) is not None and "--" not in repo and ".." not in repo
             and all(len(part) <= 96 for part in repo.split("/"))  # the Hub's own limit
             and not repo.endswith(".git") and (prefixed or "/" in repo)
             and (not at or (revision != "" and not revision.isspace())))
    return HubRef(repo, revision or None) if valid else None
