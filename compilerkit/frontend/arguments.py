"""What a caller hands compilerkit, checked before any work: every option of a compile (one
function, `check_options`, that `Compilation` runs for `compile`, `compile_to`, the command line
and the step functions alike), the model argument, and every path compilerkit writes to.

A wrong type or value is an `OptionError` naming the option, what it got and what it takes,
instead of a bare TypeError from deep inside the pipeline (an `opt_level` of 3.0 compared equal
to 3 and reached LLVM's pass builder; `input_shapes="x"` was iterated as characters).

Output paths follow one rule (`output_path`): a path the user named may be replaced, except a
file the compile reads (the model: writing over it would destroy the input); a path compilerkit
derives on its own (the C header beside a library) must not exist unless the caller allows it
(`overwrite=True`, `--overwrite`), since the user never said it could go.
"""

from __future__ import annotations

import operator
import os
from collections.abc import Mapping


class OptionError(ValueError, TypeError):
    """An argument of a compilerkit call (an option, the model argument, an output path) has
    the wrong type or value; the message names it. Both a ValueError and a TypeError, so code
    catching either (as Python's own argument errors would be caught) still does."""


def _got(value) -> str:
    return f"{value!r} ({type(value).__name__})"


def check_opt_level(opt_level) -> int:
    if isinstance(opt_level, bool) or not hasattr(opt_level, "__index__"):
        raise OptionError(f"opt_level must be an integer 0..3, got {_got(opt_level)}")
    if operator.index(opt_level) not in (0, 1, 2, 3):
        raise OptionError(f"opt_level must be 0..3, got {opt_level!r}")
    return operator.index(opt_level)


def check_flag(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise OptionError(f"{name} must be True or False, got {_got(value)}")
    return value


def check_choice(name: str, value, choices) -> str:
    if not isinstance(value, str):
        raise OptionError(f"{name} must be a name, one of {', '.join(choices)}; got "
                          f"{_got(value)}")
    if value not in choices:
        raise OptionError(f"unknown {name} {value!r}; choose one of "
                          f"{', '.join(choices)}")
    return value


def check_max_bytes(max_bytes) -> int | None:
    if max_bytes is None:
        return None
    if isinstance(max_bytes, bool) or not hasattr(max_bytes, "__index__"):
        raise OptionError(f"max_bytes must be a positive integer (bytes), got {_got(max_bytes)}")
    if operator.index(max_bytes) < 1:
        raise OptionError(f"max_bytes must be a positive integer (bytes), got {max_bytes!r}")
    return operator.index(max_bytes)


def check_input_shapes(input_shapes) -> dict | None:
    """None, or {input name: [non-negative int dims]} (a copy, dims as Python ints)."""
    if input_shapes is None:
        return None
    example = "e.g. input_shapes={'x': [1, 3, 224, 224]}"
    if not isinstance(input_shapes, Mapping):
        raise OptionError(f"input_shapes must be a dict of input name -> dims ({example}), "
                          f"got {_got(input_shapes)}")
    shapes = {}
    for name, dims in input_shapes.items():
        if not isinstance(name, str):
            raise OptionError(f"input_shapes: keys are input names (str), got {_got(name)}")
        try:
            if isinstance(dims, (str, bytes)):
                raise TypeError
            shape = [operator.index(d) for d in dims]
        except TypeError:
            raise OptionError(f"input_shapes[{name!r}]: dims must be a list of non-negative "
                              f"integers ({example}), got {_got(dims)}") from None
        if any(d < 0 or isinstance(d, bool) for d in dims):
            raise OptionError(f"input_shapes[{name!r}]: dims must be non-negative integers, "
                              f"got {list(dims)!r}")
        shapes[name] = shape
    return shapes


def check_path(name: str, path) -> str:
    """`path` (str or os.PathLike) as a str: non-empty, without NUL characters."""
    if not isinstance(path, (str, os.PathLike)):
        raise OptionError(f"{name} must be a path (str or os.PathLike), got {_got(path)}")
    text = os.fspath(path)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if not text:
        raise OptionError(f"{name} is an empty path")
    if "\0" in text:
        raise OptionError(f"{name} {text!r} contains a NUL character; no file can be named so")
    return text


# ---- output paths --------------------------------------------------------------------------

def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)  # hard links and symlinks too
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def output_path(path, option: str, reads=(), named: bool = True,
                overwrite: bool = False) -> str:
    """`path` checked as a file compilerkit is about to write, before anything is written (or
    compiled): its folder exists, it is not a folder, it is none of the files the compile
    `reads` (always refused), and, when the user did not name it (`named=False`: a path
    compilerkit derives, such as the C header), it does not exist yet unless `overwrite`.
    `option` names the argument in messages ("-o", "out", "the C header"). Returns the path."""
    path = check_path(option, path)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise OptionError(f"{option} {path!r}: the folder {folder!r} does not exist")
    if os.path.isdir(path):
        raise OptionError(f"{option} {path!r} is a folder; give a file name")
    for source in reads:
        if isinstance(source, (str, os.PathLike)) and not isinstance(source, bytes):
            source = os.fspath(source)
            if "\0" not in source and os.path.exists(source) and _same_file(path, source):
                raise OptionError(f"{option} {path!r} is the input {source!r}: compilerkit "
                                  "never writes over the file it reads; choose another name")
    if not named and not overwrite and os.path.lexists(path):
        raise OptionError(f"{option} {path!r} already exists and was not named by you; "
                          "compilerkit does not replace it: remove it, choose another output "
                          "name, or allow it with overwrite=True (--overwrite)")
    return path


def header_path(lib_path: str) -> str:
    """Where `--emit lib` writes the C header: the library's path with `.h` for its extension."""
    return os.path.abspath(os.path.splitext(lib_path)[0] + ".h")


def library_paths(out, reads=(), overwrite: bool = False) -> tuple[str, str]:
    """(library, header) paths of stage "lib" at `out`, both checked by `output_path`: the
    library is named by the caller, the header is not (and may not be the library itself)."""
    if out is None:
        raise OptionError("stage 'lib' needs an output path (out=..., -o)")
    lib = output_path(out, "out", reads)
    header = header_path(lib)
    if header == os.path.abspath(lib):
        raise OptionError(f"out {lib!r}: the C header would be written over the library; name "
                          "the library e.g. model.so (the header goes beside it, model.h)")
    # A header that an earlier `--emit lib` of compilerkit wrote there belongs to the library
    # the user names again: rebuilding into the same folder replaces it. Any other file is
    # the user's and stays unless they allow it.
    ours = _generated_header(header)
    return lib, output_path(header, "the C header", reads, named=False,
                            overwrite=overwrite or ours)


GENERATED_HEADER_MARK = "/* Generated by compilerkit. */"  # c_header's first line


def _generated_header(path: str) -> bool:
    """Whether the file at `path` is a C header compilerkit wrote (its first line the mark)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.readline().rstrip("\n") == GENERATED_HEADER_MARK
    except OSError:
        return False
