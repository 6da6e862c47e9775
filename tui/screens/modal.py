"""The look every prompt shares: a box in the middle that fits the terminal (80x24 included),
its body scrolling when it is long, its buttons always on screen."""

from __future__ import annotations

MODAL_CSS = """
{name} {{ align: center middle; }}
{name} > Vertical {{
    width: 70; max-width: 100%; height: auto; max-height: 100%;
    border: thick $primary; background: $surface; padding: 1 2;
}}
{name}.-short > Vertical {{ padding: 0 1; }}
{name} .title {{ text-style: bold; margin-bottom: 1; width: 100%; }}
{name} .body {{ height: auto; max-height: 16; }}
{name}.-short .body {{ max-height: 8; }}
{name} .buttons {{ height: auto; margin-top: 1; align-horizontal: right; }}
{name} .buttons Button {{ margin-left: 1; }}
"""
"""Formatted with the screen's class name (`MODAL_CSS.format(name="ConfirmScreen")`)."""
