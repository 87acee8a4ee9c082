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


def cache_has(build_dir, package):
    """Whether CMake found `package` (its PACKAGE_DIR entry in the cache)."""
    with open(os.path.join(build_dir, "CMakeCache.txt")) as cache:
        return any(line.startswith(f"{package}_DIR:") and "NOTFOUND" not in line for line in cache)


class CMakeBuild(build_ext):
    """atp._atp always; atp._c10d (the torch.distributed backend) where libtorch-dev is."""

    def run(self):
        self.build_dir = os.environ.get("ATP_BUILD_DIR") or os.path.join(ROOT, "build-pip")
        if not os.path.exists(os.path.join(self.build_dir, "CMakeCache.txt")):
            subprocess.run(["cmake", "-S", ROOT, "-B", self.build_dir, "-G", "Ninja",
                            "-DCMAKE_BUILD_TYPE=Release", f"-DPYTHON_EXECUTABLE={sys.executable}"],
                           check=True)
        if not cache_has(self.build_dir, "Torch"):
            self.extensions = [e for e in self.extensions if e.name != "atp._c10d"]
        super().run()

    def build_extension(self, ext):
        name = ext.name.split(".")[-1]
        targets = [name, "atp"]
        if cache_has(self.build_dir, "Gloo"):
            targets.append("gloo_allreduce")  # the ring baseline `atp cluster` runs
        subprocess.run(["cmake", "--build", self.build_dir, "--target", *targets], check=True)
        module_dir = os.path.join(self.build_dir, "python", "atp")
        module = next(f for f in os.listdir(module_dir) if f.startswith(name + ".") and f.endswith(".so"))
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(os.path.join(module_dir, module), target)
        bin_dir = os.path.join(os.path.dirname(target), "bin")
        os.makedirs(bin_dir, exist_ok=True)
        for program in targets[1:]:
            shutil.copy2(os.path.join(self.build_dir, "bin", program), os.path.join(bin_dir, program))


setup(ext_modules=[Extension("atp._atp", sources=[]), Extension("atp._c10d", sources=[])],
      cmdclass={"build_ext": CMakeBuild})
