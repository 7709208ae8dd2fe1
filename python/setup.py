"""Builds libdtnn.so with the project's CMake and bundles it into the package.

$DTNN_LIBRARY names an already built libdtnn.so to bundle instead (make test uses the one
its build made); otherwise the project around this folder is configured and built in
python/build-cmake with $DTNN_CMAKE_ARGS added (e.g. "-DDTNN_CUDA=OFF"). The wheel is
platform-specific: it carries a native library.
"""
import os
import shlex
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
PROJECT = os.path.dirname(HERE)


def built_library():
    given = os.environ.get("DTNN_LIBRARY")
    if given:
        if not os.path.isfile(given):
            raise SystemExit(f"DTNN_LIBRARY={given}: no such file")
        return given
    if not os.path.isfile(os.path.join(PROJECT, "CMakeLists.txt")):
        raise SystemExit("dtnn: the package is built from the dtnn source tree (python/ "
                         "inside it), or set DTNN_LIBRARY to a built libdtnn.so")
    build = os.path.join(HERE, "build-cmake")
    extra = shlex.split(os.environ.get("DTNN_CMAKE_ARGS", ""))
    subprocess.check_call(["cmake", "-S", PROJECT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                           "-DDTNN_SHARED=ON"] + extra)
    subprocess.check_call(["cmake", "--build", build, "--target", "dtnn_shared", "-j",
                           str(os.cpu_count() or 2)])
    return os.path.join(build, "libdtnn.so")


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        target = os.path.join(self.build_lib, "dtnn", "libdtnn.so")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(built_library(), target)


class NativeDistribution(Distribution):
    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildWithLibrary}, distclass=NativeDistribution)
