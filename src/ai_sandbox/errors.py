"""One error type, carrying what went wrong and what to do; the CLI prints it as one line, never a traceback.

Exit codes follow sysexits(3) so scripts can tell our refusals from the agent's own statuses.
"""

EXIT_USAGE = 64  # bad command line
EXIT_POLICY = 65  # no safe policy could be computed (git failed, a path cannot be hidden)
EXIT_UNAVAILABLE = 69  # the sandbox backend is missing or unusable
EXIT_INTERNAL = 70  # a bug in ai-sandbox
EXIT_CANTCREAT = 73  # a file ai-sandbox was asked to write exists (init without --force) or cannot be written
EXIT_CONFIG = 78  # a config file is malformed or unsafe
EXIT_NOT_FOUND = 127  # the agent or command is not on PATH, as a shell would say


class SandboxError(Exception):
    """A refusal: the agent does not run, and the user is told why and what to do."""

    exit_code = EXIT_POLICY

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} — {self.hint}" if self.hint else self.message


class UsageError(SandboxError):
    exit_code = EXIT_USAGE


class ConfigError(SandboxError):
    exit_code = EXIT_CONFIG


class PolicyError(SandboxError):
    exit_code = EXIT_POLICY


class UnavailableError(SandboxError):
    exit_code = EXIT_UNAVAILABLE


class NotFoundError(SandboxError):
    exit_code = EXIT_NOT_FOUND


class CantCreateError(SandboxError):
    exit_code = EXIT_CANTCREAT
