"""The processes a loop starts (agents, workers, audits, verification) and how none of them
outlives its runner: process groups, a supervisor, markers, a sweep."""
