"""The files a loop lives in: the state (one writer), the journal and the control queue (whole
lines appended), the archive, the lock; written safely (never through a symlink, scrubbed of
secrets)."""
