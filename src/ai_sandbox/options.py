"""The options of ai-sandbox itself, declared once: main's launch parser (main.parse) and cli's typer root read
them, so `--help` and what a launch accepts cannot drift apart."""

from __future__ import annotations

from ai_sandbox.backends.registry import auto_help
from ai_sandbox.config import BACKENDS, ENGINES
from ai_sandbox.records import value


@value
class Option:
    """One option of ai-sandbox itself; options come before the agent. `metavar` set: it takes a value.
    `to_typer`: main hands the whole command line to the typer app, which answers it (help, completion)."""

    names: tuple[str, ...]
    help: str
    metavar: str = ""
    to_typer: bool = False

    @property
    def name(self) -> str:
        return self.names[-1]

    @property
    def dest(self) -> str:
        return self.name.lstrip("-").replace("-", "_")


OPTIONS = (
    Option(("--dry-run",), "Print the plan and the backend command; run nothing."),
    Option(
        ("--backend",),
        f"Sandbox backend (config: backend; {auto_help()}).",
        "|".join(BACKENDS),
    ),
    Option(
        ("--network",),
        "Where the agent's connections may go (config: network; default allowlist: only the allowed domains, "
        "through ai-sandbox's proxy).",
        "allowlist|off|on",
    ),
    Option(("--engine",), "Container CLI for the docker backend (config: engine).", "|".join(ENGINES)),
    Option(("--image",), "Image for the docker backend (config: image; a profile may set its own).", "NAME"),
    Option(("--debug",), "Show a traceback on internal errors."),
    Option(("--version",), "Print the version and exit."),
    Option(("-h", "--help"), "Show this message and exit.", to_typer=True),
    # typer declares these two itself (Typer(add_completion=True)); listed so they reach it.
    Option(("--install-completion",), "Install completion for the current shell.", to_typer=True),
    Option(("--show-completion",), "Show completion for the current shell.", to_typer=True),
)


def network_mode(given: object) -> str | None:
    """--network's value, checked; None when not given (the config decides)."""
    if given is None:
        return None
    if given not in ("allowlist", "off", "on"):
        from ai_sandbox.errors import UsageError

        raise UsageError(f"unknown --network {given!r}", "use one of: allowlist, off, on")
    return str(given)


SUBCOMMANDS = {"explain", "init", "doctor", "alias", "profiles", "accept"}
