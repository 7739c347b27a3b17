"""MkDocs hook: pages that are generated from the code they document, so they cannot drift.

``<!-- pykbatch:cli -->`` becomes the reference of every command, from ``pykbatch.commands.parser()``;
``<!-- pykbatch:rules -->`` the table of every rule, from the C catalogue (``pykbatch.rules``)."""
from __future__ import annotations

import argparse
import re


def _usage(parser: argparse.ArgumentParser) -> str:
    return parser.format_help().rstrip()


def _commands(parser: argparse.ArgumentParser, prefix: str = "pykbatch") -> list[tuple[str, argparse.ArgumentParser]]:
    """(full command, parser) of every command and sub-command, depth first."""
    out = []
    for action in parser._actions:  # argparse keeps sub-parsers here and nowhere public
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out.append((f"{prefix} {name}", sub))
                out += _commands(sub, f"{prefix} {name}")
    return out


CLI_WIDTH = 88  # characters a code box of the page shows without scrolling


def cli_reference() -> str:
    import os
    from pykbatch.commands import parser
    os.environ["COLUMNS"] = str(CLI_WIDTH)  # argparse wraps to the terminal: the same page everywhere
    top = parser()
    parts = ["```text", _usage(top), "```"]
    for name, sub in _commands(top):
        parts += ["", f"## `{name}`", "", "```text", _usage(sub), "```"]
    return "\n".join(parts)


def rules_table() -> str:
    from pykbatch import errors, rules
    rows = ["| rule | Kafka's code | what is wrong |", "|---|---|---|"]
    for r in rules.RULES:
        if r.id == "none":
            continue
        what = re.sub(r"\{[a-z0-9_]+\}", "…", r.detail or r.template or "").replace("|", "\\|").replace("\n", " ")
        strict = "" if r.kafka else " *(stricter than Kafka: off with `strict=False`)*"
        rows.append(f"| `{r.id}` | {r.code} {errors.error_name(r.code)} | {what}{strict} |")
    return "\n".join(rows)


GENERATED = {"<!-- pykbatch:cli -->": cli_reference, "<!-- pykbatch:rules -->": rules_table}


def on_page_markdown(markdown: str, **_) -> str:
    for marker, make in GENERATED.items():
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown


# Material's offline plugin adds a polyfill from a CDN to every page (a Web Worker for its search
# on file://); the pages fetch nothing from the network, so it goes, and
# javascripts/offline-search.js searches there instead
_CDN_SCRIPT = re.compile(r'<script src="https?://[^"]*"[^>]*>\s*</script>')


def on_post_page(output: str, **_) -> str:
    return _CDN_SCRIPT.sub("", output)


def on_post_template(output_content: str, **_) -> str:  # 404.html, built from a template alone
    return _CDN_SCRIPT.sub("", output_content)
