"""One error hierarchy for the core; the CLI turns it into messages and exit codes.

Exit codes (documented in the README and `kvplan --help`):
  0  success
  1  a stated target is not met (capacity checks), or the deployment does not fit at all
  2  bad input: unknown model, unparsable file, invalid field or flag value
  3  the Hugging Face Hub is unreachable and nothing usable is cached
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_TARGET_NOT_MET = 1
EXIT_BAD_INPUT = 2
EXIT_UNAVAILABLE = 3


class KvplanError(Exception):
    """Base class: every expected failure the user can fix."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class BadInputError(KvplanError):
    """A flag or argument value that cannot be used."""


class NoKVMemoryError(BadInputError):
    """The weights and reserves leave nothing for the KV cache: the engine would not start.
    "Does not fit" is a capacity answer, not bad input: exit 1 in `plan` as in `check`.

    The figures are kept as ints (bytes) beside the message: `left_bytes` what the engine's
    budget leaves for the cache (zero or less), `weights_bytes` the weights on that GPU,
    `memory_bytes` the memory it starts from (the GPU's, or SGLang's free memory)."""

    exit_code = EXIT_TARGET_NOT_MET

    def __init__(self, message: str, hint: str | None = None, *, engine: str = "",
                 left_bytes: int = 0, weights_bytes: int = 0, memory_bytes: int = 0) -> None:
        super().__init__(message, hint)
        self.engine = engine
        self.left_bytes = left_bytes
        self.weights_bytes = weights_bytes
        self.memory_bytes = memory_bytes


class TargetNotMetError(KvplanError):
    """A stated target that nothing kvplan tried meets (and no figures to show instead)."""

    exit_code = EXIT_TARGET_NOT_MET


class SpecError(KvplanError):
    """A model file (YAML or config.json) with a missing, wrong or contradictory field."""

    def __init__(self, source: str, field: str | None, problem: str, hint: str | None = None):
        where = f"{source}: field '{field}'" if field else source
        super().__init__(f"{where}: {problem}", hint)
        self.source = source
        self.field = field
        self.problem = problem


class UnknownModelError(KvplanError):
    """A model name that is neither in the library nor a file."""


class UnavailableError(KvplanError):
    """A resource (the Hub) that cannot be reached and has no cached copy."""

    exit_code = EXIT_UNAVAILABLE
