"""Tools an agent's model can call: ``define_tool``, ``Tool``, ``ToolContext``, ``ToolResult``.

A tool is checked once, when it is defined, so a bad name, a missing
description or an input model that would let a misspelt argument through is a
programming error at import time, never a surprise in the middle of a run.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

import pydantic
from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    import anyio

    from runtime_client.sandbox import Sandbox

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

InputT = TypeVar("InputT")
ModelT = TypeVar("ModelT", bound=BaseModel)


class ToolDefinitionError(ValueError):
    """A tool (or a set of tools) is malformed; raised when it is defined or assembled."""


class ArgumentsError(ValueError):
    """The model's arguments do not fit the tool; the message is shown to the model."""


@dataclass(frozen=True)
class ToolResult:
    """What ``run`` returns; a bare ``str`` is shorthand for ``ToolResult(output=that)``.

    ``output`` must be JSON-serialisable (and match the tool's output model
    when it has one); the model sees it as text. ``terminate`` asks the agent
    loop to stop once every call of the turn asked for it. ``fields`` are for
    the application only and never reach the model.
    """

    output: Any
    terminate: bool = False
    is_error: bool = False
    fields: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", MappingProxyType(dict(self.fields)))


@dataclass(frozen=True)
class ToolLog:
    """A progress line a tool emitted: the application sees it, the model never does."""

    tool_call_id: str
    tool_name: str
    message: str


LogSink = Callable[[ToolLog], None]


@dataclass(frozen=True)
class ToolContext(Generic[InputT]):
    """Everything ``run`` is handed for one call.

    ``data`` is the validated input (an instance of the input model, ``None``
    for a tool without input, the raw mapping for a pass-through tool).
    ``cancel_scope`` is the scope the per-tool timeout lives in: a tool can
    cancel itself with it, or read ``deadline`` (``anyio.current_time()``
    clock; ``inf`` when none) to hand the remaining time to what it calls.
    """

    data: InputT
    arguments: Mapping[str, Any]
    tool_call_id: str
    tool_name: str
    cancel_scope: anyio.CancelScope
    sandbox: Sandbox | None
    _log_sink: LogSink | None = field(default=None, repr=False)

    @property
    def deadline(self) -> float:
        return self.cancel_scope.deadline

    def log(self, message: str) -> None:
        if self._log_sink is not None:
            self._log_sink(ToolLog(self.tool_call_id, self.tool_name, str(message)))


RunFn = Callable[[ToolContext[InputT]], Awaitable["ToolResult | str"]]


def _no_lock_keys(arguments: Mapping[str, Any]) -> frozenset[str]:
    return frozenset()


@dataclass(frozen=True)
class Tool(Generic[InputT]):
    """One tool as the runtime holds it. Make it with ``define_tool``.

    ``parameters`` is the JSON schema of the arguments the model sees.
    ``parse`` turns the model's arguments into ``ToolContext.data`` or raises
    ``ArgumentsError``. ``lock_keys`` names what a call touches: calls of one
    turn that share a key run one after another, in the order the model made
    them; all others run concurrently.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    run: RunFn[InputT]
    parse: Callable[[Mapping[str, Any]], InputT]
    input: type[BaseModel] | None = None
    output: type[BaseModel] | None = None
    timeout: float | None = None
    lock_keys: Callable[[Mapping[str, Any]], frozenset[str]] = _no_lock_keys

    def __post_init__(self) -> None:
        _check_name(self.name)
        _check_description(self.name, self.description)
        if not _is_async_callable(self.run):
            raise ToolDefinitionError(
                f"tool {self.name!r}: run must be an async function (async def), got {self.run!r}"
            )
        if self.timeout is not None and not self.timeout > 0:
            raise ToolDefinitionError(
                f"tool {self.name!r}: timeout must be a positive number of seconds or None"
            )
        if self.parameters.get("type") != "object":
            raise ToolDefinitionError(
                f"tool {self.name!r}: the parameters schema must describe an object"
            )
        object.__setattr__(self, "parameters", MappingProxyType(dict(self.parameters)))


@overload
def define_tool(
    *,
    name: str,
    description: str,
    input: type[ModelT],
    output: type[BaseModel] | None = None,
    run: RunFn[ModelT],
    timeout: float | None = None,
    serial: bool = False,
) -> Tool[ModelT]: ...


@overload
def define_tool(
    *,
    name: str,
    description: str,
    input: None = None,
    output: type[BaseModel] | None = None,
    run: RunFn[None],
    timeout: float | None = None,
    serial: bool = False,
) -> Tool[None]: ...


def define_tool(
    *,
    name: str,
    description: str,
    input: type[BaseModel] | None = None,
    output: type[BaseModel] | None = None,
    run: RunFn[Any],
    timeout: float | None = None,
    serial: bool = False,
) -> Tool[Any]:
    """Define a tool; everything is checked now (``ToolDefinitionError``).

    ``input`` is a pydantic model of the arguments; unknown fields are made an
    error (``extra="forbid"``) so a model's misspelt argument is reported, not
    dropped. ``input=None`` means the tool takes no arguments. ``timeout`` is
    in seconds. ``serial=True`` runs the tool's calls of one turn one at a
    time, in the order the model made them.
    """
    _check_name(name)
    if output is not None and not _is_model_class(output):
        raise ToolDefinitionError(
            f"tool {name!r}: output must be a pydantic BaseModel subclass or None, got {output!r}"
        )
    lock_keys = _serial_keys(name) if serial else _no_lock_keys
    if input is None:
        return Tool(
            name=name,
            description=description,
            parameters={"type": "object", "properties": {}, "additionalProperties": False},
            run=run,
            parse=_parse_no_arguments,
            output=output,
            timeout=timeout,
            lock_keys=lock_keys,
        )
    if not _is_model_class(input):
        raise ToolDefinitionError(
            f"tool {name!r}: input must be a pydantic BaseModel subclass (an object of "
            f"named fields) or None, got {input!r}"
        )
    strict = _strict_input_model(name, input)
    return Tool(
        name=name,
        description=description,
        parameters=json_schema(strict),
        run=run,
        parse=_model_parser(strict, input),
        input=input,
        output=output,
        timeout=timeout,
        lock_keys=lock_keys,
    )


def json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema as providers want it: no top-level title."""
    schema = model.model_json_schema()
    schema.pop("title", None)
    return schema


def _check_name(name: object) -> None:
    if not isinstance(name, str) or not TOOL_NAME.match(name):
        raise ToolDefinitionError(
            f"tool name {name!r} is invalid: use 1-64 letters, digits, '_' or '-' "
            "(the providers' common rule)"
        )


def _check_description(name: str, description: object) -> None:
    if not isinstance(description, str) or not description.strip():
        raise ToolDefinitionError(
            f"tool {name!r}: description must be a non-empty string; the model chooses tools by it"
        )


def _is_async_callable(run: object) -> bool:
    if inspect.iscoroutinefunction(run):
        return True
    call = getattr(run, "__call__", None)  # noqa: B004 - an object with async __call__
    return call is not None and inspect.iscoroutinefunction(call)


def _is_model_class(value: object) -> bool:
    return isinstance(value, type) and issubclass(value, BaseModel)


def _strict_input_model(name: str, model: type[BaseModel]) -> type[BaseModel]:
    if issubclass(model, pydantic.RootModel):
        raise ToolDefinitionError(
            f"tool {name!r}: input {model.__name__} is a RootModel; tool arguments are an "
            "object of named fields"
        )
    extra = model.model_config.get("extra")
    if extra == "forbid":
        return model
    if extra is not None:
        raise ToolDefinitionError(
            f"tool {name!r}: input {model.__name__} sets extra={extra!r}; tool inputs must "
            "forbid unknown fields so that a misspelt argument is an error"
        )
    # Unset: forbid it in a subclass used for validation only, so the
    # caller's class is left as it was.
    config = ConfigDict(**{**model.model_config, "extra": "forbid"})
    strict: type[BaseModel] = type(
        model.__name__,
        (model,),
        {"model_config": config, "__module__": model.__module__, "__doc__": model.__doc__},
    )
    return strict


def _model_parser(
    strict: type[BaseModel], model: type[BaseModel]
) -> Callable[[Mapping[str, Any]], BaseModel]:
    valid = tuple(field.alias or name for name, field in strict.model_fields.items())

    def parse(arguments: Mapping[str, Any]) -> BaseModel:
        try:
            checked = strict.model_validate(dict(arguments))
        except pydantic.ValidationError as exc:
            raise ArgumentsError(describe_validation_error(exc, valid)) from None
        if strict is model:
            return checked
        # Hand ``run`` the caller's own class (equality and ``type()`` checks
        # work); the values are already validated, so no second validation.
        data = model.model_construct(_fields_set=checked.model_fields_set, **dict(checked))
        if checked.__pydantic_private__:
            object.__setattr__(data, "__pydantic_private__", checked.__pydantic_private__)
        return data

    return parse


def _parse_no_arguments(arguments: Mapping[str, Any]) -> None:
    if arguments:
        raise ArgumentsError(
            f"this tool takes no arguments; got {', '.join(sorted(map(str, arguments)))}"
        )


def _serial_keys(name: str) -> Callable[[Mapping[str, Any]], frozenset[str]]:
    keys = frozenset({f"tool:{name}"})

    def lock_keys(arguments: Mapping[str, Any]) -> frozenset[str]:
        return keys

    return lock_keys


def describe_validation_error(exc: pydantic.ValidationError, valid: Sequence[str] = ()) -> str:
    """One clause per problem, naming the argument: what a model can act on."""
    lines = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "(arguments)"
        if error["type"] == "extra_forbidden" and len(error["loc"]) == 1 and valid:
            lines.append(f"{where}: unknown argument (valid: {', '.join(valid)})")
        elif error["type"] == "extra_forbidden":
            lines.append(f"{where}: unknown argument")
        else:
            lines.append(f"{where}: {error['msg']}")
    return "; ".join(lines)
