# -*- Python -*-
import os
import shutil
import subprocess

import lit.formats
from lit.llvm import llvm_config

config.name = "MERAK"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".onnxtxt", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py",
                   "onnx-node", "torch", "fuzz"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.merak_obj_root, "test")

llvm_config.use_default_substitutions()
config.substitutions.append(("%python", "/usr/bin/python3"))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
config.substitutions.append(("%merak_tools_dir", config.merak_tools_dir))
config.substitutions.append(("%merak_src_root", config.merak_src_root))

tool_dirs = [config.merak_tools_dir, config.llvm_tools_dir]
llvm_config.add_tool_substitutions(["merak-opt", "merak-run", "merak-compile"], tool_dirs)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.merak_tools_dir, append_path=True)

# `cuda`: merak was built with the CUDA runtime and this machine has a GPU
# (nvidia-smi lists one); tests that run --target cuda programs need both.
def _have_gpu():
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    try:
        r = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode == 0 and "GPU" in r.stdout

if getattr(config, "merak_enable_cuda", "OFF").upper() in ("ON", "1", "TRUE", "YES") \
        and _have_gpu():
    config.available_features.add("cuda")

# `mpirun`: Open MPI's launcher is on PATH (parallel programs).
if shutil.which("mpirun"):
    config.available_features.add("mpirun")
