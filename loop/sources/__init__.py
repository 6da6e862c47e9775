"""The four task sources: while any has pending work, the loop goes on.

Each module answers one question, "what is left in this source?", as a SourceReport, and never
raises for bad input: a source it cannot read is `available: false` with the reason, which
makes the aggregate `uncertain` and the hook block conservatively.
"""
