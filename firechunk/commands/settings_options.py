"""A command's options, built from the settings sections it takes (`firechunk.settings`).

A command declares a parameter per section, e.g. `run: RunSettings`, or
`run: Annotated[RunSettings, Without("keep_runs")]` to offer all but some fields; `with_settings`
shows typer one option per field instead (the field's `Cli` gives its flags and metavar, its
description the help, its constraints the range) and, when the command runs, builds each
section from those options and passes it on. A value the section refuses exits 2 with one
line naming the option.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Optional, get_args, get_origin

import annotated_types
import typer
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from firechunk.commands.exits import CommandError
from firechunk.settings import Cli

KEYWORD_ONLY = inspect.Parameter.KEYWORD_ONLY  # typer passes every value by name


@dataclass(frozen=True)
class Without:
    """The fields of a section a command does not offer (they keep their defaults)."""

    names: frozenset[str]

    def __init__(self, *names: str) -> None:
        object.__setattr__(self, "names", frozenset(names))


def with_settings(command: Callable[..., None]) -> Callable[..., None]:
    """`command` as typer sees it: each settings-section parameter replaced by an option per
    field; called, the options become the sections again."""
    hints = typing.get_type_hints(command, include_extras=True)
    sections: dict[str, tuple[type[BaseModel], frozenset[str]]] = {}
    parameters: list[inspect.Parameter] = []
    for name, parameter in inspect.signature(command).parameters.items():
        section, without = _section_of(hints[name])
        if section is None:
            parameters.append(parameter.replace(kind=KEYWORD_ONLY, annotation=hints[name]))
            continue
        sections[name] = (section, without)
        parameters += [
            _option(field_name, field)
            for field_name, field in section.model_fields.items()
            if field_name not in without
        ]

    @functools.wraps(command)
    def invoke(**options: Any) -> None:
        built = {
            name: _build(section, without, options) for name, (section, without) in sections.items()
        }
        return command(**options, **built)

    # typer reads the options: the signature and annotations are theirs, not the command's.
    del invoke.__wrapped__
    invoke.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    invoke.__annotations__ = {parameter.name: parameter.annotation for parameter in parameters}
    return invoke


def _section_of(annotation: object) -> tuple[type[BaseModel] | None, frozenset[str]]:
    without: frozenset[str] = frozenset()
    if get_origin(annotation) is Annotated:
        annotation, *extras = get_args(annotation)
        without = next((extra.names for extra in extras if isinstance(extra, Without)), without)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, without
    return None, without


def _option(name: str, field: FieldInfo) -> inspect.Parameter:
    cli = _cli(field)
    bounds = {
        key: getattr(item, key)
        for item in field.metadata
        if isinstance(item, annotated_types.Ge | annotated_types.Le)
        for key in ("ge", "le")
        if hasattr(item, key)
    }
    default = field.get_default(call_default_factory=True)
    option = typer.Option(
        *_flags(name, cli),
        help=field.description,
        metavar=cli.metavar,
        envvar=cli.envvar,
        min=bounds.get("ge"),
        max=bounds.get("le"),
        show_default=_shown(default),
    )
    # None when not given, so the section applies its own defaults and rules (an unset
    # soft limit follows a smaller --hard-tokens); the help still shows the default.
    return inspect.Parameter(
        name,
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[Optional[field.annotation], option],  # noqa: UP045 (a run-time type)
    )


def _shown(default: object) -> bool | str:
    """The default as the help shows it; none for an empty one."""
    if default in (None, []):
        return False
    return str(default).lower() if isinstance(default, bool) else str(default)


def _cli(field: FieldInfo) -> Cli:
    return next((item for item in field.metadata if isinstance(item, Cli)), Cli())


def _flags(name: str, cli: Cli) -> tuple[str, ...]:
    return cli.flags or (f"--{name.replace('_', '-')}",)


def _build(section: type[BaseModel], without: frozenset[str], options: dict[str, Any]) -> BaseModel:
    """The section from its options (taken out of `options`; one not given keeps the
    field's default), or exit 2 naming the option. A field the command does not offer
    keeps its default, and an option of the command's own by that name (search's
    `--collection`) stays the command's."""
    offered = section.model_fields.keys() - without
    taken = {name: options.pop(name) for name in list(options) if name in offered}
    try:
        return section(**{name: value for name, value in taken.items() if value is not None})
    except ValidationError as error:
        problem = error.errors()[0]
        field = str(problem["loc"][0]) if problem["loc"] else None
        message = str(problem["msg"]).removeprefix("Value error, ")
        if field is None or field not in section.model_fields:
            raise CommandError(message) from None
        flag = _flags(field, _cli(section.model_fields[field]))[0]
        raise CommandError(f"{flag}: {message}") from None
