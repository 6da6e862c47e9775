"""MkDocs hook: the site shows the screenshots from `screenshots/` at the repository's root.

They are regenerated there (fixed clock, fixed size) and the README shows them too, so the
site adds them to its files at build time instead of keeping a second copy that could drift.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files


def on_files(files: Files, config: Any) -> Files:
    root = Path(config["config_file_path"]).resolve().parent
    for svg in sorted((root / "screenshots").glob("*.svg")):
        files.append(
            File(
                f"screenshots/{svg.name}",
                src_dir=str(root),
                dest_dir=config["site_dir"],
                use_directory_urls=config["use_directory_urls"],
            )
        )
    return files
