"""Run lmms-eval's own command line (`lmms_eval.__main__.cli_evaluate`) with the stub model
registered through lmms-eval's model registry. Usage: python tests/lmms/run_stub.py <lmms-eval args>"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lmms_eval.models import MODEL_REGISTRY_V2  # noqa: E402
from lmms_eval.models.registry_v2 import ModelManifest  # noqa: E402

MODEL_REGISTRY_V2.register_manifest(
    ModelManifest(model_id="statelab_stub", simple_class_path="stub_model.StubModel"), overwrite=True
)

from lmms_eval.__main__ import cli_evaluate  # noqa: E402

if __name__ == "__main__":
    cli_evaluate()
