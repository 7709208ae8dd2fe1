"""The cffi declarations (dtnn/_cdef.h) against include/dtnn.h, by a C compiler: every
function prototype must compile beside the header's, and every struct's size, its fields'
offsets and sizes and every enum constant must be the compiler's. A field added to a public
struct and not here fails this test rather than corrupting memory at run time."""
import os
import shutil
import subprocess

import pytest

from dtnn._lib import ffi

HERE = os.path.dirname(os.path.abspath(__file__))
INCLUDE = os.path.join(HERE, "..", "..", "include")
CDEF = os.path.join(HERE, "..", "dtnn", "_cdef.h")
STRUCTS = ["dtnn_error", "dtnn_build_params", "dtnn_loss_params", "dtnn_metrics",
           "dtnn_tensor_info", "struct dtnn_opt_params", "dtnn_sched_params", "dtnn_split",
           "dtnn_dataset", "dtnn_data_params", "dtnn_train_state", "dtnn_train_params",
           "dtnn_progress", "dtnn_external_params", "dtnn_external_ops",
           "dtnn_gradcheck_result", "dtnn_loader_params", "dtnn_loader_info"]
ENUMS = ["dtnn_status", "dtnn_init_scheme", "dtnn_conv_algo", "dtnn_precision",
         "dtnn_loss_kind", "dtnn_tensor_kind", "dtnn_dtype", "dtnn_opt_kind",
         "dtnn_sched_kind", "dtnn_comm_dtype", "dtnn_collectives", "dtnn_allreduce_mode",
         "dtnn_external_init"]


def _compiler():
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler to check the declarations with")
    return cc


def test_functions_match_the_header(tmp_path):
    with open(CDEF, encoding="utf-8") as f:
        functions = f.read().split("/* ---- functions ---- */", 1)[1]
    src = tmp_path / "functions.c"
    src.write_text('#include "dtnn.h"\n#include <stdlib.h>\n' + functions)
    r = subprocess.run([_compiler(), "-std=c11", "-fsyntax-only", "-Werror", "-I", INCLUDE,
                        str(src)], capture_output=True, text=True)
    assert r.returncode == 0, "a declaration in _cdef.h differs from dtnn.h:\n" + r.stderr


def test_layouts_match_the_compiler(tmp_path):
    lines, expect = [], []
    for name in STRUCTS:
        t = ffi.typeof(name)
        lines.append(f'printf("%zu\\n", sizeof({name}));')
        expect.append(("sizeof " + name, ffi.sizeof(t)))
        for field, info in t.fields:
            lines.append(f'printf("%zu\\n", offsetof({name}, {field}));')
            expect.append((f"{name}.{field} offset", info.offset))
            lines.append(f'printf("%zu\\n", sizeof((({name} *)0)->{field}));')
            expect.append((f"{name}.{field} size", ffi.sizeof(info.type)))
    for name in ENUMS:
        for value, constant in sorted(ffi.typeof(name).elements.items()):
            lines.append(f'printf("%lld\\n", (long long){constant});')
            expect.append((constant, value))
    src = tmp_path / "layout.c"
    src.write_text('#include <stddef.h>\n#include <stdio.h>\n#include "dtnn.h"\n'
                   "int main(void) {\n" + "\n".join(lines) + "\nreturn 0; }\n")
    exe = tmp_path / "layout"
    subprocess.run([_compiler(), "-std=c11", "-I", INCLUDE, str(src), "-o", str(exe)],
                   check=True)
    got = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
    wrong = [f"{what}: cffi {want}, C {int(g)}" for (what, want), g in zip(expect, got)
             if int(g) != want]
    assert len(got) == len(expect) and not wrong, "\n".join(wrong)
