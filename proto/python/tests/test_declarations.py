"""What an App declares to the proxy: tool schemas from type hints, the
confirmation flag, resources, templates and prompts."""

from __future__ import annotations

import dataclasses
import json
from typing import Annotated, Any, Literal

import pydantic
import pytest

from openclaw_proxy_app import App, Context


def schema_of(app: App, name: str) -> dict[str, Any]:
    tools, _, _, _ = app.declarations()
    [tool] = [t for t in tools if t.name == name]
    value = json.loads(tool.input_schema_json)
    assert isinstance(value, dict)
    return value


def test_parameters_become_properties_and_defaults_make_them_optional() -> None:
    app = App("http://127.0.0.1:1")

    @app.tool
    def search(query: str, limit: int = 10, ctx: Context | None = None) -> list[str]:
        """Search the notes.

        Longer text that is not part of the description."""
        return []

    schema = schema_of(app, "search")
    assert schema["type"] == "object"
    assert schema["properties"]["query"]["type"] == "string"
    assert schema["properties"]["limit"]["type"] == "integer"
    assert schema["required"] == ["query"]
    tools, _, _, _ = app.declarations()
    assert tools[0].description == "Search the notes."


def test_a_context_parameter_is_not_part_of_the_schema() -> None:
    app = App("http://127.0.0.1:1")

    @app.tool
    async def steps(count: int, ctx: Context) -> str:
        return "done"

    assert list(schema_of(app, "steps")["properties"]) == ["count"]


def test_annotated_fields_describe_arguments_and_literals_become_enums() -> None:
    app = App("http://127.0.0.1:1")

    @app.tool(name="paint", description="Paint a wall.")
    def paint_wall(color: Annotated[Literal["red", "teal"], pydantic.Field(description="The paint.")]) -> str:
        return color

    prop = schema_of(app, "paint")["properties"]["color"]
    assert prop["enum"] == ["red", "teal"]
    assert prop["description"] == "The paint."


@dataclasses.dataclass
class Note:
    title: str
    body: str = ""


class Query(pydantic.BaseModel):
    text: str
    tags: list[str] = []


@pytest.mark.parametrize("kind", [Note, Query])
def test_a_single_dataclass_or_model_parameter_is_the_whole_arguments_object(kind: type) -> None:
    app = App("http://127.0.0.1:1")

    def handler(args: Any) -> None:
        return None

    handler.__annotations__["args"] = kind
    app.tool(name="t")(handler)
    schema = schema_of(app, "t")
    assert "args" not in schema["properties"]
    assert set(schema["properties"]) == set(kind.__annotations__)


def test_the_confirmation_flag_and_timeout_reach_the_definition() -> None:
    app = App("http://127.0.0.1:1")

    @app.tool(confirm="Really delete it?", timeout_seconds=90)
    def delete_note(name: str) -> None: ...

    @app.tool(confirm=True)
    def wipe() -> None: ...

    @app.tool
    def harmless() -> None: ...

    tools = {t.name: t for t in app.declarations()[0]}
    assert tools["delete_note"].HasField("confirm") and tools["delete_note"].confirm.message == "Really delete it?"
    assert tools["delete_note"].timeout_seconds == 90
    assert tools["wipe"].HasField("confirm") and tools["wipe"].confirm.message == ""
    assert not tools["harmless"].HasField("confirm")


def test_the_client_capabilities_a_tool_needs_reach_the_definition_and_unknown_ones_are_refused() -> None:
    app = App("http://127.0.0.1:1")

    @app.tool(requires_client=["elicitation", "sampling", "elicitation"])
    def ask_twice() -> None: ...

    @app.tool
    def plain() -> None: ...

    tools = {t.name: t for t in app.declarations()[0]}
    assert list(tools["ask_twice"].requires.client_capabilities) == ["elicitation", "sampling"]
    assert not tools["plain"].HasField("requires")
    with pytest.raises(ValueError, match="telepathy"):
        app.tool(requires_client=["telepathy"])  # type: ignore[list-item]


def test_resources_templates_and_prompts_are_declared() -> None:
    app = App("http://127.0.0.1:1")

    @app.resource("notes:///index", mime_type="text/plain", description="The list of notes.")
    def index() -> str:
        return "a, b"

    @app.resource("notes:///{name}")
    def note(name: str) -> str:
        return name

    @app.prompt(title="Summarise")
    def summarise(note: Annotated[str, pydantic.Field(description="The note.")], style: str = "brief") -> str:
        return note

    _, resources, templates, prompts = app.declarations()
    assert [(r.uri, r.name, r.mime_type, r.description) for r in resources] == [
        ("notes:///index", "index", "text/plain", "The list of notes.")]
    assert [(t.uri_template, t.name) for t in templates] == [("notes:///{name}", "note")]
    [prompt] = prompts
    assert (prompt.name, prompt.title) == ("summarise", "Summarise")
    assert [(a.name, a.required, a.description) for a in prompt.arguments] == [
        ("note", True, "The note."), ("style", False, "")]


def test_a_template_handler_parameter_that_is_no_variable_is_refused_naming_it() -> None:
    app = App("http://127.0.0.1:1")
    with pytest.raises(TypeError, match=r"notes:///\{name\}.*\['other'\]"):
        @app.resource("notes:///{name}")
        def note(name: str, other: str) -> str:
            return name


def test_a_url_that_is_not_http_is_refused() -> None:
    with pytest.raises(ValueError, match="http:// or https://"):
        App("127.0.0.1:8000")


def test_star_args_cannot_be_described() -> None:
    app = App("http://127.0.0.1:1")
    with pytest.raises(TypeError, match="name each parameter"):
        @app.tool
        def anything(*values: str) -> None: ...


@pytest.mark.parametrize("name", ["has space", "", "x" * 129, "emoji🙂"])
def test_a_tool_or_prompt_name_the_proxy_would_refuse_is_refused_at_once(name: str) -> None:
    app = App("http://127.0.0.1:1")
    with pytest.raises(ValueError, match="1 to 128 of A-Z a-z 0-9 _ - ."):
        app.tool(name=name)(lambda: None)
    with pytest.raises(ValueError, match="is not valid"):
        app.prompt(name=name)(lambda: "")
