"""The commands of a Raft group's log, as data: nothing that reaches a log is ever unpickled.

pysyncobj encodes a replicated call as ``pickle.dumps((method id, args))`` and unpickles every
entry when it applies it. Whoever can put an entry in a log (a follower forwards its proposals
to the leader as bytes; a leader sends entries to its followers) could then run code on every
node that applies it. A command here is ``MARK`` followed by msgpack of ``[command id, *args]``.

Journals written before this encoding hold pickles (protocol 2, pysyncobj's). They are read by
an unpickler that resolves no class or function but the two by which protocol 2 spells a bytes
object, each replaced by a function that only builds bytes, and the result must have exactly
the shape our commands had. Anything else is refused (``CommandError``), whatever its encoding.
"""

from __future__ import annotations

import io
import pickle
from typing import Any

import msgpack

MARK = b"\xc1"  # a byte msgpack never uses, and no pickle (pysyncobj's start with b"\x80") begins with

# Command ids: the numbers pysyncobj gave RaftGroup's replicated methods (sorted by name), which
# the entries written before this encoding carry.
ANNOUNCE = 0
APPEND = 1
SUBMIT = 2
NAMES = {ANNOUNCE: "announce", APPEND: "append", SUBMIT: "submit"}
_ARGS: dict[int, tuple[type, ...]] = {ANNOUNCE: (int,), APPEND: (int, bytes), SUBMIT: (bytes,)}


class CommandError(ValueError):
    """The bytes are not one of our commands (a hostile or corrupt entry)."""


class UnknownCommandError(CommandError):
    """A command of an id this build does not know: written by a later release."""


def encode(command: int, *args: Any) -> bytes:
    return MARK + bytes(msgpack.packb([command, *args], use_bin_type=True))


def decode(data: bytes) -> tuple[int, tuple[Any, ...]]:
    """``(command id, args)`` of a command's bytes (without pysyncobj's type byte)."""
    try:
        if data[:1] == MARK:
            items = msgpack.unpackb(data[1:], raw=False, use_list=False, strict_map_key=True)
            if not isinstance(items, tuple) or not items:
                raise CommandError("not a command")
            call: Any = (items[0], items[1:])
        elif data[:1] == b"\x80":
            call = _OldCommandUnpickler(io.BytesIO(data)).load()
            if not isinstance(call, tuple):
                call = (call, ())
        else:
            raise CommandError("unknown encoding")
    except CommandError:
        raise
    except Exception as e:  # noqa: BLE001 - whatever a malformed input makes a decoder raise
        raise CommandError(f"undecodable: {type(e).__name__}: {e}") from None
    if len(call) != 2 or not isinstance(call[1], tuple):  # (id, args, kwargs): ours never had kwargs
        raise CommandError("not a command")
    command, args = call
    if type(command) is int and command > max(_ARGS):
        raise UnknownCommandError(f"command id {command}; this build knows ids up to {max(_ARGS)}")
    kinds = _ARGS.get(command) if type(command) is int else None
    if kinds is None or len(args) != len(kinds) or any(type(a) is not k for a, k in zip(args, kinds, strict=True)):
        raise CommandError("not a command")
    return command, args


def _latin1(text: Any, encoding: Any = "latin1") -> bytes:
    """Protocol 2's ``_codecs.encode(text, "latin1")``, by which it spells a non-empty bytes object."""
    if type(text) is not str or encoding not in ("latin1", "latin-1"):
        raise CommandError("not a bytes object")
    return text.encode("latin-1")


def _empty(*args: Any) -> bytes:
    """Protocol 2's ``bytes()``, by which it spells b""."""
    if args:
        raise CommandError("not a bytes object")
    return b""


_OLD_GLOBALS = {("_codecs", "encode"): _latin1, ("__builtin__", "bytes"): _empty, ("builtins", "bytes"): _empty}


class _OldCommandUnpickler(pickle.Unpickler):
    """Every way a pickle reaches code (GLOBAL, STACK_GLOBAL, INST, OBJ, the extension registry)
    goes through ``find_class``, and a persistent id is refused by default: this one resolves only
    the two names above, to functions of its own."""

    def find_class(self, module: str, name: str) -> Any:
        found = _OLD_GLOBALS.get((module, name))
        if found is None:
            raise CommandError(f"refers to {module}.{name}")
        return found
