"""The ``pykbatch`` command line: one subcommand per module of this package, each adding its
own arguments (``add_parser``); this module assembles them and runs one.

Exit status (``EXIT_CODES``): 0 nothing wrong found; 1 damage found in the data (culprits,
damaged batches, index mismatches; everything readable was still printed); 2 the command could
not run: bad arguments, or an input that cannot be opened or an output that cannot be written.
A damaged file never ends a command in a traceback."""
from __future__ import annotations

import argparse
import os
import sys

from pykbatch.commands import consume, copy, dump, groups, produce, redpanda, repair, rules, sample, tiered, validate
from pykbatch.commands.common import CANNOT_RUN, EXIT_CODES, UsageError, Verdict
from pykbatch.log.files import STDIN

# in the order --help lists them
COMMANDS = (dump, validate, repair, sample, rules, redpanda, tiered, consume, produce, copy, groups)


class _PrintVersion(argparse.Action):
    """--version, printed as one line (argparse's own action re-wraps it to the terminal)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(_version_line())
        parser.exit()


def _version_line() -> str:
    """pykbatch's version, and which kernels the native core picked on this machine."""
    from pykbatch import __version__, native_info
    info = native_info()
    return (f"pykbatch {__version__} (CRC-32C {info['crc32c']}, CRC-32 {info['crc32']}; magics "
            f"{', '.join(map(str, info['magics']))}; codecs {', '.join(info['codecs'])}; {info['rules']} rules)")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="pykbatch", description="Read, check and repair Kafka record batches.",
        epilog="exit status: " + "; ".join(f"{code} {what}" for code, what in EXIT_CODES.items()))
    p.add_argument("--version", action=_PrintVersion, help="print the version and the native kernels in use, then exit")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(sub)
    return p


def _inputs(args) -> list[str]:
    specs = getattr(args, "files", None) or ()
    files = [f for spec in specs for f in (spec.split(",") if args.command == "dump" else [spec]) if f]
    if getattr(args, "file", None):
        files.append(args.file)
    if getattr(args, "segment", None):
        files.append(args.segment)
    store = getattr(args, "store", None)
    if store and ("://" not in store or store.startswith("file://")):  # a local store (URLs are fsspec's)
        files.append(store[len("file://"):] if store.startswith("file://") else store)
    return files


def main(argv=None) -> int:
    """Runs one command; returns its exit status (``EXIT_CODES``)."""
    from pykbatch.values.registry import RegistryError
    p = parser()
    args = p.parse_args(argv)
    for path in _inputs(args):  # said once, up front, instead of an OSError half way through
        if path == STDIN:
            continue
        try:
            os.stat(path)
        except OSError as exc:
            print(f"pykbatch {args.command}: {path}: {_reason(exc)}", file=sys.stderr)
            return CANNOT_RUN
    args.verdict = Verdict()
    try:
        status = args.run(args)
        sys.stdout.flush()  # here, not at the interpreter's exit, where a closed pipe would make it 120
        return args.verdict.end(status)
    except BrokenPipeError:  # the reader went away (| head): stop quietly, as coreutils do
        _silence_stdout()
        # with the verdict reached so far: damage must not become 0 because the reader stopped reading
        return args.verdict.status
    except OSError as exc:  # the machine's: the file named, the reason in words
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"pykbatch {args.command}: error: {where}{_reason(exc)}", file=sys.stderr)
        return CANNOT_RUN
    except (UsageError, ImportError, RegistryError) as exc:  # not the data's problem: the command line's,
        print(f"pykbatch {args.command}: error: {exc}", file=sys.stderr)  # a missing extra's, a registry's
        return CANNOT_RUN


def _reason(exc: OSError) -> str:
    """"not a directory", "no such file or directory", ...: the system's words without "[Errno N]"."""
    text = exc.strerror or str(exc)
    return text[:1].lower() + text[1:]


def _silence_stdout() -> None:
    """After a closed pipe: stdout pointed at /dev/null, so the interpreter's final flush of what
    is still buffered does not fail again on the way out."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
