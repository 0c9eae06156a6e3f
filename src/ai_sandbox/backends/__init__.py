"""Sandbox backends: each one module behind the small `Backend` protocol (protocol.py), listed in one registry
(registry.py). A backend turns the policy (one value) and the agent's argv into a launch plan (plan.py): the
exact command, with the launch check in it. It also tells the policy which paths it cannot name, so the
policy can widen them before anything runs. choose.py picks the one a launch uses; host.py and check.py hold
what the backends that run host commands (firejail, bwrap) share.
"""
