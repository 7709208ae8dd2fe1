"""The one place that loads libdtnn and turns its statuses into exceptions.

The library is found, in order: $DTNN_LIBRARY (a path to libdtnn.so), the copy bundled in
this package by `pip install`, and an installed libdtnn.so on the loader's path. It is
loaded with RTLD_GLOBAL because Open MPI opens its own plug-ins later, and they look up
libmpi's symbols globally (mpi4py loads libmpi the same way).
"""
import ctypes.util
import os

import cffi

ffi = cffi.FFI()
_HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(_HERE, "_cdef.h"), encoding="utf-8") as _f:
    ffi.cdef(_f.read())


def _find_library():
    env = os.environ.get("DTNN_LIBRARY")
    if env:
        if not os.path.isfile(env):
            raise ImportError(f"DTNN_LIBRARY={env}: no such file (point it at libdtnn.so)")
        return os.path.abspath(env)
    bundled = os.path.join(_HERE, "libdtnn.so")
    if os.path.isfile(bundled):
        return bundled
    found = ctypes.util.find_library("dtnn")
    if found:
        return found
    raise ImportError("libdtnn.so not found: install the package with `pip install ./python` "
                      "(which builds and bundles it), or set DTNN_LIBRARY to a built one "
                      "(build/libdtnn.so)")


LIBRARY_PATH = _find_library()
# RTLD_NODELETE: the library stays mapped when cffi's handle is collected at interpreter exit,
# and with it the OpenMP runtime it loaded, whose idle worker threads may still be spinning
# then (unmapping them under a running thread was a segfault at exit, seen under load).
lib = ffi.dlopen(LIBRARY_PATH, ffi.RTLD_NOW | ffi.RTLD_GLOBAL | ffi.RTLD_NODELETE)


class Error(RuntimeError):
    """A failure reported by libdtnn; str() is its one-line message, .status its code."""

    def __init__(self, message, status="error"):
        super().__init__(message)
        self.status = status


class ArgumentError(Error, ValueError):
    """A value the library refused (an option, a shape, a name): also a ValueError."""


class Interrupted(KeyboardInterrupt):
    """Training stopped by a signal (Ctrl-C, SIGTERM) after a completed step; the checkpoint
    named in the message (when the run saves one) resumes it exactly."""


def new_error():
    return ffi.new("dtnn_error *")


def raise_error(err, what=None):
    """Raises the exception for a filled dtnn_error."""
    message = ffi.string(err.message).decode("utf-8", "replace")
    status = ffi.string(lib.dtnn_strerror(err.code)).decode()
    if not message:
        message = status
    if what:
        message = f"{what}: {message}"
    if err.code == lib.DTNN_ERR_INTERRUPTED:
        raise Interrupted(message)
    if err.code in (lib.DTNN_ERR_ARG, lib.DTNN_ERR_SHAPE):
        raise ArgumentError(message, status)
    raise Error(message, status)


def check(status, err, what=None):
    """Raises unless status is DTNN_OK."""
    if status != lib.DTNN_OK:
        raise_error(err, what)


def text(ptr):
    """A C string from the library as str ('' for NULL)."""
    return "" if ptr == ffi.NULL else ffi.string(ptr).decode("utf-8", "replace")
