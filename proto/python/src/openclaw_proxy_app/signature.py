"""A handler's parameters read from its type hints: the JSON Schema of its
arguments, and how a call's JSON arguments become Python values.

Each parameter is one property (its default makes it optional, and
`Annotated[T, pydantic.Field(description=...)]` describes it), except that a
handler whose only parameter is a dataclass or pydantic model takes the
whole arguments object as that type. A parameter annotated `Context` gets the
call's context and is not part of the schema. Validation is pydantic's."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import typing
from collections.abc import Callable
from typing import Any

import pydantic
from pydantic.fields import FieldInfo

from .context import Context
from .errors import ToolError


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and (
        issubclass(annotation, pydantic.BaseModel) or dataclasses.is_dataclass(annotation)
    )


def _is_context(annotation: Any) -> bool:
    """`Context`, or `Context | None`."""
    if annotation is Context:
        return True
    arguments = [a for a in typing.get_args(annotation) if a is not type(None)]
    return arguments == [Context] and type(None) in typing.get_args(annotation)


class Signature:
    """The arguments of one handler."""

    def __init__(self, function: Callable[..., Any], what: str) -> None:
        hints = typing.get_type_hints(function, include_extras=True)
        self.context_name: str | None = None
        self.whole: tuple[str, pydantic.TypeAdapter[Any]] | None = None
        fields: dict[str, Any] = {}
        for name, parameter in inspect.signature(function).parameters.items():
            if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                raise TypeError(f"{what}: *args and **kwargs cannot be described; name each parameter")
            annotation = hints.get(name, Any)
            if _is_context(annotation):
                self.context_name = name
                continue
            default = ... if parameter.default is parameter.empty else parameter.default
            fields[name] = (annotation, default)
        if len(fields) == 1:
            (name, (annotation, _)), = fields.items()
            if _is_model(annotation):
                self.whole = (name, pydantic.TypeAdapter(annotation))
        if self.whole is None:
            model = pydantic.create_model(f"{getattr(function, '__name__', 'handler')}_arguments", **fields)
            self.model: type[pydantic.BaseModel] | None = model
        else:
            self.model = None
        self.names = list(fields)
        self.required = [name for name, (_, default) in fields.items()
                         if default is ... or (isinstance(default, FieldInfo) and default.is_required())]

    def schema(self) -> dict[str, Any]:
        """The JSON Schema of the arguments object."""
        if self.whole is not None:
            schema = self.whole[1].json_schema()
        else:
            assert self.model is not None
            schema = self.model.model_json_schema()
        schema.pop("title", None)
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})
        return schema

    def bind(self, arguments: dict[str, Any], context: Context | None) -> dict[str, Any]:
        """The keyword arguments of the handler; a ToolError naming what is
        wrong when the arguments do not fit."""
        try:
            if self.whole is not None:
                values = {self.whole[0]: self.whole[1].validate_python(arguments)}
            else:
                assert self.model is not None
                parsed = self.model.model_validate(arguments)
                values = {name: getattr(parsed, name) for name in self.names}
        except pydantic.ValidationError as error:
            raise ToolError(f"invalid arguments: {_describe(error)}") from None
        if self.context_name is not None:
            values[self.context_name] = context
        return values


def _describe(error: pydantic.ValidationError) -> str:
    parts = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "arguments"
        parts.append(f"{where}: {item['msg']}")
    return "; ".join(parts)


async def call_handler(function: Callable[..., Any], arguments: dict[str, Any]) -> Any:
    """Runs a handler: a coroutine function on the event loop (where a cancel
    reaches it as asyncio.CancelledError), a plain function in a worker
    thread, so that it never holds up the bridge."""
    if inspect.iscoroutinefunction(function):
        return await function(**arguments)
    return await asyncio.to_thread(function, **arguments)
