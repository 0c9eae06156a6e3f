"""ai-sandbox: run AI coding agents in an OS sandbox that hides the secrets next to the code."""

__version__ = "0.1.0"
