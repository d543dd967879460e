"""How `firechunk --help` and every `firechunk COMMAND --help` show a command.

typer's own rendering shows `<bool>` after a flag, which takes no value; `{url}` for an
argument in the usage line; and keeps a docstring's line breaks, which cut sentences in
the middle at any terminal width but the one the docstring was wrapped for. The classes
here (given to typer in `firechunk.cli`) show a flag with no value, an argument as its
name in capitals and no type (`firechunk crawl [OPTIONS] URL`), an option's value as a word in
capitals (its metavar, else its type), and each paragraph of help as one line that the
terminal wraps.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from typer import Exit
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from firechunk.commands.exits import ExitCode, broken_pipe, closed_by_rich

if TYPE_CHECKING:
    from typer._click import Context, Parameter

# typer's type labels (`<int range>`) and the word shown instead.
_TYPE_WORDS = {
    "str": "TEXT",
    "int": "INTEGER",
    "int range": "INTEGER",
    "float": "NUMBER",
    "float range": "NUMBER",
    "path": "PATH",
    "file": "FILE",
    "directory": "DIR",
}


def one_line_paragraphs(text: str | None) -> str | None:
    """`text` with each paragraph's lines joined by a space (paragraphs stay apart)."""
    if text is None:
        return None
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(" ".join(paragraph.split()) for paragraph in paragraphs)


def tidy(param: Parameter, ctx: Context) -> Parameter:
    """Set the metavar a parameter is shown with, unless its declaration set one."""
    if param.metavar is not None:
        return param
    if isinstance(param, TyperArgument):
        param.metavar = (param.name or "").upper()
        param.display_type_rich = _no_type  # type: ignore[method-assign]
    elif isinstance(param, TyperOption):
        param.metavar = "" if param.is_flag else _value_word(param, ctx)
    return param


def _no_type(ctx: Context) -> None:
    """An argument's type, not shown: its name in capitals and its help say what it is."""
    return None


def _value_word(option: TyperOption, ctx: Context) -> str:
    """`v1|v2` for a choice, else the capitalised word for the type."""
    label = option.display_type(ctx).strip("<>")
    return _TYPE_WORDS.get(label, label)


class Command(TyperCommand):
    """A sub-command shown as the module docstring says."""

    def __init__(self, *args: Any, help: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, help=one_line_paragraphs(help), **kwargs)

    def get_params(self, ctx: Context) -> list[Parameter]:
        return [tidy(param, ctx) for param in super().get_params(ctx)]

    def collect_usage_pieces(self, ctx: Context) -> list[str]:
        """`[OPTIONS] URL`: a required argument bare, an optional one in brackets."""
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if isinstance(param, TyperArgument):
                name = param.metavar or ""
                pieces.append(name if param.required else f"[{name}]")
        return pieces


class Group(TyperGroup):
    """The `firechunk` group: its own options shown as the commands' are, and a help
    whose reader went away (`firechunk --help | head -1`) ending as any closed pipe does
    (`firechunk.commands.exits.broken_pipe`), not as a failure."""

    def get_params(self, ctx: Context) -> list[Parameter]:
        return [tidy(param, ctx) for param in super().get_params(ctx)]

    def make_context(self, *args: Any, **kwargs: Any) -> Context:
        with _closed_pipe_exits_141():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: Context) -> Any:
        with _closed_pipe_exits_141():
            return super().invoke(ctx)


@contextlib.contextmanager
def _closed_pipe_exits_141() -> Iterator[None]:
    """A help (or an option's error) written to a reader that went away: exit 141."""
    try:
        yield
    except BrokenPipeError as error:
        broken_pipe(error)
    except SystemExit as error:
        if closed_by_rich(error):
            raise Exit(code=int(ExitCode.BROKEN_PIPE)) from None
        raise
