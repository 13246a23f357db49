"""Compiles proxy.proto into the wheel, so that an installed app imports
ready-made stubs and never runs protoc.

The .proto is copied under `openclaw_proxy_app/_proto/` before it is
compiled, so the generated modules import each other from inside the
package (`from openclaw_proxy_app._proto import proxy_pb2`) rather than from
a top-level `openclaw` package that would clash with others.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

PACKAGE_DIR = "openclaw_proxy_app/_proto"


class ProtoBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        from grpc_tools import protoc

        root = Path(self.root)
        # In the repository the contract lives beside the package; an sdist
        # carries its own copy.
        candidates = [root / "proxy.proto", root.parent / "proto/openclaw/proxy/v1/proxy.proto"]
        source = next((path for path in candidates if path.is_file()), None)
        if source is None:
            raise FileNotFoundError(f"proxy.proto not found at {candidates[0]} or {candidates[1]}")
        self._scratch = Path(tempfile.mkdtemp(prefix="openclaw-proxy-app-build-"))
        proto_root, out = self._scratch / "in", self._scratch / "out"
        (proto_root / PACKAGE_DIR).mkdir(parents=True)
        (out / PACKAGE_DIR).mkdir(parents=True)
        shutil.copyfile(source, proto_root / PACKAGE_DIR / "proxy.proto")
        well_known = Path(protoc.__file__).parent / "_proto"
        status = protoc.main([
            "protoc", f"-I{proto_root}", f"-I{well_known}", f"--python_out={out}",
            f"--pyi_out={out}", f"--grpc_python_out={out}", f"{PACKAGE_DIR}/proxy.proto",
        ])
        if status != 0:
            raise RuntimeError(f"protoc could not compile {source} (exit status {status})")
        (out / PACKAGE_DIR / "__init__.py").write_text('"""Generated from proxy.proto at build time."""\n')
        for generated in sorted((out / PACKAGE_DIR).iterdir()):
            build_data["force_include"][str(generated)] = f"{PACKAGE_DIR}/{generated.name}"

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        shutil.rmtree(self._scratch, ignore_errors=True)
