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

    @classmethod
    def on_stage(cls, engine: str, stage: int, left_bytes: int, weights_bytes: int,
                 gpu_bytes: int, hint: str | None = None) -> NoKVMemoryError:
        """A budget (GPU less weights and reserves) of zero or less on one pipeline stage."""
        from kvplan.core.units import human_bytes

        return cls(f"no memory is left for the KV cache: {engine} budget on stage {stage} is "
                   f"{human_bytes(left_bytes)} after {human_bytes(weights_bytes)} of weights "
                   f"on a {human_bytes(gpu_bytes)} GPU", hint, engine=engine,
                   left_bytes=left_bytes, weights_bytes=weights_bytes, memory_bytes=gpu_bytes)

    @classmethod
    def past_fraction(cls, engine: str, kept_fraction: float, free_bytes: int,
                      weights_bytes: int, left_bytes: int, hint: str | None = None
                      ) -> NoKVMemoryError:
        """An engine that keeps `kept_fraction` of the free memory back (SGLang's
        1 - mem_fraction_static) and whose weights take the rest."""
        from kvplan.core.units import human_bytes

        return cls(f"no memory is left for the KV cache: {engine} keeps {kept_fraction:.0%} "
                   f"of {human_bytes(free_bytes)} free and the weights take "
                   f"{human_bytes(weights_bytes)} per GPU", hint, engine=engine,
                   left_bytes=left_bytes, weights_bytes=weights_bytes, memory_bytes=free_bytes)


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
