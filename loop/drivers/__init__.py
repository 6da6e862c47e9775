"""The drivers: they gather facts and carry out what the engine decides. Claude Code's hooks
(Stop, StopFailure, the slash commands), the runner (one agent per iteration), the parallel
workers; starting a loop, resuming one, telling a person."""
