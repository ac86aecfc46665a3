"""The one writer of the benchmark scripts' records: ``<out>/<prefix>_<gpu>_<time>.json``."""
from __future__ import annotations

import datetime
import json
import pathlib
import sys


def write_record(out: pathlib.Path, prefix: str, rows: list, **fields) -> pathlib.Path:
    """Write ``rows`` with the device, torch's and Triton's versions, the command line and any further
    ``fields`` (a ``method``, say); return the path."""
    import torch
    import triton

    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    device = torch.cuda.get_device_name()
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{prefix}_{device.split()[1].lower()}_{stamp}.json"
    path.write_text(json.dumps(dict(device=device, torch=torch.__version__, triton=triton.__version__,
                                    command=" ".join([sys.executable, *sys.argv]), **fields, rows=rows), indent=1))
    return path
