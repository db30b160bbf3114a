"""Runs the PyTorch recipe (examples/python/sdsfs_torch.py) over a mount with
DataLoader(num_workers=2) and checks every item against the signal-dataset library's reading
of the same dataset.

    torch_loader.py DATASET MOUNT FIELD [SET]

The truth: the samples are the library's record's field; the boxes and labels those of the
field's `.sigmf-meta` as sigmf_check.py computes them from the library's records (and, for a
set, from the library's reading of that annotation set), in the same order. Prints
{"records", "boxes", "labelled", "batches"} as JSON; any mismatch raises.
"""

import json
import sys
from pathlib import Path

import numpy as np
import signal_dataset
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent / "examples" / "python"))

import sigmf_check  # noqa: E402
from sdsfs_torch import LabelledIQ, collate  # noqa: E402


def expected(dataset, field, set_name):
    """Each record's (samples, boxes (k, 4), labels), from the library."""
    rows = list(dataset.annotations[set_name]) if set_name else None
    out = []
    for ordinal in range(len(dataset)):
        record = dataset[ordinal]
        samples = np.asarray(record.fields[field].data)
        shown = dict(sigmf_check.shown_fields(record, ordinal, rows))
        annotations = []
        if field in shown:
            annotations, _ = sigmf_check.expected_annotations(shown[field], field)
        boxes = np.array([[a["core:sample_start"], a["core:sample_count"], a["core:freq_lower_edge"],
                           a["core:freq_upper_edge"]] for a in annotations], dtype=np.float64)
        out.append((samples, boxes.reshape(-1, 4), [a.get("core:label") for a in annotations]))
    return out


def main(root, mount, field, set_name=None):
    want = expected(signal_dataset.open(root), field, set_name)
    data = LabelledIQ(mount, field, set=set_name)
    loader = torch.utils.data.DataLoader(data, batch_size=3, num_workers=2, collate_fn=collate)
    got = []
    batches = 0
    for samples, boxes, labels in loader:
        batches += 1
        for i in range(samples.shape[0]):
            got.append((samples[i].numpy(), boxes[i].numpy(), labels[i]))
    if len(got) != len(want):
        raise AssertionError(f"{len(got)} items, the library has {len(want)} records")
    for ordinal, ((gs, gb, gl), (ws, wb, wl)) in enumerate(zip(got, want)):
        if gs.dtype != ws.dtype or not np.array_equal(gs, ws):
            raise AssertionError(f"record {ordinal}: samples differ ({gs.dtype} {gs.shape} vs {ws.dtype} {ws.shape})")
        if gb.shape != wb.shape or not np.array_equal(gb, wb):
            raise AssertionError(f"record {ordinal}: boxes\n got {gb.tolist()}\nwant {wb.tolist()}")
        if gl != wl:
            raise AssertionError(f"record {ordinal}: labels {gl} want {wl}")
    print(json.dumps({
        "records": len(got),
        "boxes": sum(len(b) for _, b, _ in got),
        "labelled": sum(1 for _, b, _ in got if len(b)),
        "batches": batches,
    }))


if __name__ == "__main__":
    main(*sys.argv[1:])
