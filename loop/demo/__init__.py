"""The demo: a scripted agent and a workspace for it, used by `loopdeck demo` and by the tests.

The agent is a real program with a real process, so the runner is exercised exactly as it is
with Claude Code, minus the model.
"""
