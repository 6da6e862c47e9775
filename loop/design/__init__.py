"""The design file a loop can be started from (`DESIGN-<timestamp>.md`): its acceptance
criteria, validation commands and task type (`parse`), the prompt made from it (`prompt`), and
the lock that notices when it changes under a running loop (`lock`)."""

from loop.design.parse import Criterion, Design, DesignError, newest, parse, read

__all__ = ["Criterion", "Design", "DesignError", "newest", "parse", "read"]
