"""loopdeck's monitor: a Textual app that watches what `loop` writes and steers it."""
