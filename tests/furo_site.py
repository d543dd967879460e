"""A Sphinx API reference in Furo's theme, as Firecrawl gives its pages: our own words in
Furo's shapes, for the tests of how clean-up removes a site's navigation and counts it.

Every page carries the whole sidebar tree of the reference above its title: nested lists
(`*`, `+`, `-` by depth) of relative links such as `* [Guides](../guides/index.html)`,
and after every entry that has children its expand button, "Toggle navigation of …",
between blank lines. An API of about two hundred modules makes the tree most of each
page's markdown, and its blank lines alone over four hundred lines. Below the title: headings with
`[¶](…#slug "Permalink to this headline")` anchors, prose, a code sample, then a pager,
the footer and Furo's "On this page" list.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from tests.chunk_helpers import sentences

BASE = "https://semaphore.example.org/en/stable"
SECTIONS = ("signals", "transports", "storage", "timing", "routing", "testing", "plugins", "config")
MODULES = (
    "pulse", "flare", "beacon", "horn", "lamp", "flag", "relay", "mast", "cable", "radio",
    "courier", "ledger", "archive", "vault", "journal", "bell", "siren", "whistle", "drum",
    "gong", "buoy", "kite", "torch", "mirror",
)  # fmt: skip
CLASSES = ("Sender", "Receiver", "Error")  # each module's
BULLETS = ("*", "+", "-")  # by depth, as Firecrawl writes nested lists


def page_url(module: str) -> str:
    return f"{BASE}/reference/semaphore.{module}.html"


def furo_page(section: str, module: str, seed: int) -> str:
    """The markdown of the reference page of `semaphore.<section>.<module>`."""
    return "\n".join([*_theme_controls(), *sidebar(), "", *_body(section, module, seed)])


def furo_crawl(path: Path, pages: int) -> Path:
    """A crawl file of the first `pages` module pages of the reference, at `path`."""
    modules = [(section, module) for section in SECTIONS for module in MODULES][:pages]
    data = [
        {
            "markdown": furo_page(section, module, seed),
            "metadata": {
                "sourceURL": page_url(f"{section}.{module}"),
                "url": page_url(f"{section}.{module}"),
                "title": f"semaphore.{section}.{module} - Semaphore 4.2 documentation",
                "statusCode": 200,
            },
        }
        for seed, (section, module) in enumerate(modules)
    ]
    path.write_text(json.dumps({"status": "completed", "data": data}), encoding="utf-8")
    return path


def sidebar() -> list[str]:
    """The sidebar tree: the guides, then the reference's sections, modules and classes."""
    guides = [_entry(1, name, f"guides/{name.lower()}.html") for name in ("Install", "Tutorial")]
    sections = [
        _entry(1, section.title(), f"reference/{section}.html", _modules(section))
        for section in SECTIONS
    ]
    return [
        *_entry(0, "Guides", "guides/index.html", guides),
        *_entry(0, "API reference", "reference/index.html", sections),
        *_entry(0, "Changelog", "changelog.html"),
    ]


def _modules(section: str) -> list[list[str]]:
    entries = []
    for module in MODULES:
        name = f"semaphore.{section}.{module}"
        entries.append(_entry(2, name, f"reference/{name}.html", _classes(section, module)))
    return entries


def _classes(section: str, module: str) -> list[list[str]]:
    return [
        _entry(3, f"{module.title()}{name}", f"reference/{section}.{module}.{name}.html")
        for name in CLASSES
    ]


def _entry(depth: int, name: str, target: str, children: Sequence[list[str]] = ()) -> list[str]:
    """One entry of the tree and, below its expand button, its children."""
    indent = "  " * depth
    lines = [f"{indent}{BULLETS[depth % 3]} [{name}](../{target})"]
    if children:
        lines += ["", f"{indent}  Toggle navigation of {name}", ""]
        lines += [line for child in children for line in child]
    return lines


def _theme_controls() -> list[str]:
    """Furo's buttons and labels above the sidebar, and the site's name and logo."""
    return [
        "Contents", "", "Menu", "", "Expand", "", "Light mode", "", "Dark mode", "",
        "Auto light/dark, in light mode", "", "Auto light/dark, in dark mode", "",
        "Hide navigation sidebar", "", "Hide table of contents sidebar", "",
        "[Skip to content](#furo-main-content)", "",
        "Toggle site navigation sidebar", "",
        "[Semaphore 4.2 documentation](../index.html)", "",
        "Toggle Light / Dark / Auto color theme", "", "Toggle table of contents sidebar", "",
        "[![Logo](../_static/semaphore.svg)\\", "\\", "Semaphore 4.2 documentation](../index.html)",
        "",
    ]  # fmt: skip


def _body(section: str, module: str, seed: int) -> list[str]:
    """The page's own text (prose from `seed`), then the pager, the footer and the
    page's table of contents."""
    name = f"semaphore.{section}.{module}"
    url = page_url(f"{section}.{module}")
    sender = f"{module.title()}Sender"

    def heading(marks: str, title: str, slug: str) -> str:
        return f'{marks} {title} [¶]({url}\\#{slug} "Permalink to this headline")'

    return [
        heading("#", name, name.replace(".", "-")),
        "",
        f"The `{module}` module sends {section} signals over one channel at a time. "
        f"A `{sender}` owns the channel; a receiver reads from it and acknowledges each "
        "signal, so a sender always knows which signals are still in flight.",
        "",
        heading("##", "Sending", "sending"),
        "",
        sentences(90, seed, tag=f"{module}send"),
        "",
        "```python",
        f"from {name} import {sender}",
        "",
        f'sender = {sender}("harbour", timeout=5.0)',
        'sender.send("lights on")',
        "```",
        "",
        heading("##", "Receiving", "receiving"),
        "",
        sentences(90, seed, tag=f"{module}read"),
        "",
        f"[Next\\\n\\\nsemaphore.{section}.next](next.html) "
        f"[Previous\\\n\\\nsemaphore.{section}.prev](prev.html)",
        "",
        "Copyright © 2025, the Semaphore authors",
        "",
        "Made with [Sphinx](https://www.sphinx-doc.org/) and [@pradyunsg](https://pradyunsg.me)'s "
        "[Furo](https://github.com/pradyunsg/furo)",
        "",
        "On this page",
        "",
        f"* [{name}](#)",
        "  * [Sending](#sending)",
        "  * [Receiving](#receiving)",
    ]
