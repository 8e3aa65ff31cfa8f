#!/usr/bin/env python3
"""Let PyPI's CUDA-built torchvision / torchaudio / torchcodec load next to torch+cpu.

On linux x86_64 PyPI only has CUDA builds of these three packages. Their extension modules list
libc10_cuda.so, libtorch_cuda.so, libcudart.so.13 and libnvrtc.so.13 as NEEDED, which a "+cpu"
torch does not ship, so `import torchvision` fails ("operator torchvision::nms does not exist")
and `import vllm` fails with it (transformers' image utilities import torchvision).

This script compiles one small stub library per missing soname. Each exports exactly the symbols
the extensions reference and nothing installed defines; every stub function aborts with a message
if it is ever called (only CUDA code paths reach them). The CUDA registration hooks that run from
static constructors (__cudaRegisterFatBinary & co.) are harmless no-ops. The extension libraries
then get an RPATH entry ($ORIGIN-relative) pointing at the stub folder, so no LD_LIBRARY_PATH is
needed. Running it again is safe: stubs are rebuilt, RPATH entries are added only once.

Usage: <venv>/bin/python .ci/cuda_stubs.py            (needs gcc, binutils and patchelf on PATH)
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import subprocess
import sys
import sysconfig

PACKAGES = ("torchvision", "torchaudio", "torchcodec")
CUDA_SONAMES = ("libc10_cuda.so", "libtorch_cuda.so", "libcudart.so.13", "libnvrtc.so.13")
SYSTEM_LIBS = ("libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1", "libpthread.so.0", "ld-linux-x86-64.so.2")
SYSTEM_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64")
# Called from static constructors/destructors of CUDA objects at load time: must not abort.
HARMLESS_PREFIXES = (
    "__cudaRegister",
    "__cudaUnregister",
    "__cudaInitModule",
    "__cudaPopCallConfiguration",
    "__cudaPushCallConfiguration",
)


def _run(*cmd: str, stdin: str | None = None) -> str:
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, check=False).stdout


def needed_libs(path: str) -> list[str]:
    return re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", _run("readelf", "-d", path))


def dynamic_symbols(path: str, which: str) -> list[tuple[str, str, str]]:
    """(type letter, name, version) of the defined or undefined dynamic symbols of a library."""
    rows = []
    for line in _run("nm", "-D", which, path).splitlines():
        parts = line.split()
        if not parts:
            continue
        kind, full = parts[-2] if len(parts) >= 2 else "", parts[-1]
        name, _, version = full.partition("@")
        rows.append((kind, name, version.lstrip("@")))
    return rows


def libraries(site: str, package: str) -> list[str]:
    return glob.glob(os.path.join(site, package, "**", "*.so*"), recursive=True)


def soname_for(name: str, version: str) -> str:
    if version.startswith("libnvrtc") or name.startswith("nvrtc"):
        return "libnvrtc.so.13"
    if version.startswith("libcudart") or name.startswith(("cuda", "__cuda", "cu")):
        return "libcudart.so.13"
    if "c10" in name and "cuda" in name.lower():
        return "libc10_cuda.so"
    return "libtorch_cuda.so"


def stub_source(symbols: dict[str, str], demangled: dict[str, str]) -> str:
    lines = [
        "#include <stdio.h>",
        "#include <stdlib.h>",
        "static void statelab_cuda_stub(const char *what) {",
        '  fprintf(stderr, "CUDA stub called on a CPU-only install: %s\\n", what);',
        "  abort();",
        "}",
    ]
    for i, name in enumerate(sorted(symbols)):
        pretty = demangled.get(name, name).replace('"', "'").replace("\\", "/")
        if name.startswith(HARMLESS_PREFIXES):
            lines += [
                f"static void *handle_{i}[16];",
                f'__attribute__((visibility("default"))) void *sym_{i}(void) __asm__("{name}");',
                f"void *sym_{i}(void) {{ return handle_{i}; }}",
            ]
        elif "(" not in pretty and not name.startswith(("cuda", "nvrtc", "cu")):
            # A data object (e.g. c10::cuda::CUDACachingAllocator::allocator), referenced by
            # address but never used on CPU paths: zero-filled storage.
            lines.append(f'__attribute__((visibility("default"))) char sym_{i}[256] __asm__("{name}") = {{0}};')
        else:
            lines += [
                f'__attribute__((visibility("default"))) void sym_{i}(void) __asm__("{name}");',
                f'void sym_{i}(void) {{ statelab_cuda_stub("{pretty}"); }}',
            ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    site_default = sysconfig.get_paths()["purelib"]
    parser.add_argument("--site-packages", default=site_default)
    parser.add_argument("--dest", default=None, help="stub folder (default <site-packages>/_statelab_cuda_stubs)")
    parser.add_argument("--no-patch", action="store_true", help="do not add RPATH entries (use LD_LIBRARY_PATH)")
    args = parser.parse_args()
    site = args.site_packages
    dest = args.dest or os.path.join(site, "_statelab_cuda_stubs")

    extensions = [p for pkg in PACKAGES for p in libraries(site, pkg) if set(needed_libs(p)) & set(CUDA_SONAMES)]
    if not extensions:
        print("cuda_stubs: no extension library needs CUDA; nothing to do")
        return 0

    providers = glob.glob(os.path.join(site, "torch", "lib", "*.so*"))
    for pkg in PACKAGES:
        providers += libraries(site, pkg)
        providers += [
            p
            for p in glob.glob(os.path.join(site, f"{pkg}.libs", "*.so*"))
            if not re.search(r"libcudart|libnvrtc", os.path.basename(p))
        ]
    for lib in SYSTEM_LIBS:
        found = next((os.path.join(d, lib) for d in SYSTEM_DIRS if os.path.exists(os.path.join(d, lib))), None)
        if found:
            providers.append(found)
    defined = {name for p in providers for _, name, _ in dynamic_symbols(p, "--defined-only")}

    missing: dict[str, str] = {}
    for path in extensions:
        for kind, name, version in dynamic_symbols(path, "--undefined-only"):
            if kind == "U" and name not in defined:  # weak references may stay unresolved
                missing[name] = version
    names = sorted(missing)
    demangled = dict(zip(names, _run("c++filt", stdin="\n".join(names)).splitlines())) if names else {}
    # Only CUDA-side symbols; the rest (Python C API, FFmpeg...) come from the process at run time.
    cuda = {
        n: v
        for n, v in missing.items()
        if v.startswith(("libcudart", "libnvrtc"))
        or re.match(r"(__cuda|cuda|nvrtc|cu[A-Z])", n)
        or "cuda" in demangled.get(n, n).lower()
    }

    groups: dict[str, dict[str, str]] = {s: {} for s in CUDA_SONAMES}
    for name, version in cuda.items():
        groups[soname_for(name, version)][name] = version

    os.makedirs(dest, exist_ok=True)
    for soname, symbols in groups.items():
        c_path = os.path.join(dest, f"{soname}.c")
        with open(c_path, "w") as fh:
            fh.write(stub_source(symbols, demangled))
        cmd = ["gcc", "-shared", "-fPIC", "-O1", "-o", os.path.join(dest, soname), c_path, f"-Wl,-soname,{soname}"]
        versions = sorted({v for v in symbols.values() if v})
        if versions:
            map_path = os.path.join(dest, f"{soname}.map")
            with open(map_path, "w") as fh:
                for version in versions:
                    members = "; ".join(n for n, v in sorted(symbols.items()) if v == version)
                    fh.write(f"{version} {{ global: {members}; }};\n")
            cmd.append(f"-Wl,--version-script={map_path}")
        subprocess.run(cmd, check=True)
        print(f"cuda_stubs: {soname}: {len(symbols)} symbols")

    if args.no_patch:
        print(f"export LD_LIBRARY_PATH={dest}")
        return 0
    patched = 0
    for path in extensions:
        entry = "$ORIGIN/" + os.path.relpath(dest, os.path.dirname(path))
        current = _run("patchelf", "--print-rpath", path).strip().split(":")
        if entry not in current:
            subprocess.run(["patchelf", "--add-rpath", entry, path], check=True)
            patched += 1
    print(f"cuda_stubs: {len(extensions)} extension libraries use the stubs ({patched} newly patched)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
