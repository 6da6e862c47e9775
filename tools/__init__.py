"""Development tools run from a clone (`python tools/screenshots.py`); not part of the package."""
