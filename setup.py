"""Builds the `atp` Python package with the project's CMake build: the pybind11 module and the
`atp` program (which atp.launch starts) go into the package. Offline, with Debian's packages:

    pip install --no-build-isolation .

ATP_BUILD_DIR=build reuses an existing build tree instead of configuring a new one.
"""
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = os.environ.get("ATP_BUILD_DIR") or os.path.join(ROOT, "build-pip")
        if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
            subprocess.run(["cmake", "-S", ROOT, "-B", build_dir, "-G", "Ninja",
                            "-DCMAKE_BUILD_TYPE=Release", f"-DPYTHON_EXECUTABLE={sys.executable}"],
                           check=True)
        targets = ["_atp", "atp"]
        with open(os.path.join(build_dir, "CMakeCache.txt")) as cache:
            has_gloo = any(line.startswith("Gloo_DIR:") and "NOTFOUND" not in line for line in cache)
        if has_gloo:
            targets.append("gloo_allreduce")  # the ring baseline `atp cluster` runs
        subprocess.run(["cmake", "--build", build_dir, "--target", *targets], check=True)
        module_dir = os.path.join(build_dir, "python", "atp")
        module = next(f for f in os.listdir(module_dir) if f.startswith("_atp") and f.endswith(".so"))
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(os.path.join(module_dir, module), target)
        bin_dir = os.path.join(os.path.dirname(target), "bin")
        os.makedirs(bin_dir, exist_ok=True)
        for program in targets[1:]:
            shutil.copy2(os.path.join(build_dir, "bin", program), os.path.join(bin_dir, program))


setup(ext_modules=[Extension("atp._atp", sources=[])], cmdclass={"build_ext": CMakeBuild})
