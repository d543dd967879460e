"""GX's Data Docs page views, compiling their Jinja templates once per process.

GX builds a new Jinja environment for every page view, and `build_data_docs` makes one
view per site section and one for the index: every validation compiled the same fifty
templates again, half the time it spent on Data Docs. These views are GX's own with one
bytecode cache shared by the process, so a template is compiled the first time it is
used and loaded from memory after that. The HTML is the same; a template whose source
changes (another GX version) is compiled again, as Jinja checks its checksum.

`firechunk.validate.suites` names these classes in the Data Docs site's configuration;
they import GX, so only validation imports this module.
"""

from __future__ import annotations

import threading

from great_expectations.render.view import DefaultJinjaIndexPageView, DefaultJinjaPageView
from jinja2 import BytecodeCache
from jinja2.bccache import Bucket


class _CompiledTemplates(BytecodeCache):
    """Compiled templates in memory, by Jinja's key for a template name and file."""

    def __init__(self) -> None:
        self._code: dict[str, bytes] = {}
        self._lock = threading.Lock()  # Prefect may validate runs in threads of one process

    def load_bytecode(self, bucket: Bucket) -> None:
        with self._lock:
            code = self._code.get(bucket.key)
        if code is not None:
            bucket.bytecode_from_string(code)  # dropped by Jinja if the source changed

    def dump_bytecode(self, bucket: Bucket) -> None:
        code = bucket.bytecode_to_string()
        with self._lock:
            self._code[bucket.key] = code


COMPILED_TEMPLATES = _CompiledTemplates()


class PageView(DefaultJinjaPageView):
    """GX's page view (suites, validation results), its templates compiled once."""

    # GX passes these two by name, read from the signature: keep them as they are.
    def __init__(self, custom_styles_directory=None, custom_views_directory=None) -> None:
        super().__init__(custom_styles_directory, custom_views_directory)
        self.env.bytecode_cache = COMPILED_TEMPLATES


class IndexPageView(DefaultJinjaIndexPageView):
    """GX's index page view, its templates compiled once."""

    def __init__(self, custom_styles_directory=None, custom_views_directory=None) -> None:
        super().__init__(custom_styles_directory, custom_views_directory)
        self.env.bytecode_cache = COMPILED_TEMPLATES
