"""A PyTorch dataset over a mounted sdsfs dataset: each item is one record's IQ samples with the
label boxes its `.sigmf-meta` shows, read from the mount's `columns/` (docs/MOUNT.md, "Columns"
and "Label tables").

    import torch
    from sdsfs_torch import LabelledIQ, collate

    data = LabelledIQ("/mnt/demo", "projections/communications_rx/receivers/rx0/iq")
    loader = torch.utils.data.DataLoader(data, batch_size=4, num_workers=2,
                                         collate_fn=collate)
    for samples, boxes, labels in loader:
        ...  # samples: complex64 (4, 20000); boxes: 4 float64 (k, 4); labels: 4 lists of k

An item is `(samples, boxes, labels)`:
- `samples`: the record's IQ field, a complex64 tensor of the field's shape, read from
  `columns/<field>.npy` (a uniform column: memory-mapped, so a worker reads only the records
  it is given) or from `<field>.raw` at `<field>.offsets.npy` (a ragged column);
- `boxes`: a float64 tensor `(k, 4)`, one row per box the field's `.sigmf-meta` shows, in its
  order: `sample_start`, `sample_count` (the receiver's own samples), `freq_lower_edge_hz`,
  `freq_upper_edge_hz` (absolute Hz), from `columns/labels.arrow`;
- `labels`: the boxes' class names (`None` for a box without one), a list of `k` strings.

`set=None` gives the records' own labels; `set="<name>"` an annotation set's (a model's
detections, say). Boxes the `.sigmf-meta` leaves out (their numbers are null in the table) are
left out here too. Every record is an item, with `k = 0` where it has no box for the field.

The label table is read once, memory-mapped, when a worker first needs it, so the dataset
pickles small and works with any multiprocessing start method.
"""

import hashlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc
import torch

VIEW_SUFFIXES = (".raw", ".json", ".npy", ".sigmf-data", ".sigmf-meta", ".spectrogram.png")


def encode_segment(segment, leaf):
    """A field name's segment as the mount names it (docs/MOUNT.md, "Field names as paths")."""
    text = segment.replace("%", "%25").replace("\0", "%00")
    if text == "":
        text = "%"
    elif text in (".", ".."):
        text = "%2E" * len(text)
    elif not leaf and text.endswith(VIEW_SUFFIXES):
        dot = text.rindex(".")
        text = text[:dot] + "%2E" + text[dot + 1:]
    if len(text.encode()) > (239 if leaf else 255):
        # The first 200 bytes, cut back where they would split a UTF-8 character or an escape.
        head = text.encode()[:200].decode(errors="ignore")
        if "%" in head[-2:]:
            head = head[:head.rindex("%")]
        text = head + "%~" + hashlib.sha256(segment.encode()).hexdigest()[:16]
    return text


def column_path(mount, field):
    """The path of `field`'s column under the mount's `columns/`, without a view suffix."""
    parts = field.split("/")
    encoded = [encode_segment(p, i == len(parts) - 1) for i, p in enumerate(parts)]
    return f"{mount}/columns/" + "/".join(encoded)


class LabelledIQ(torch.utils.data.Dataset):
    """Records of a mounted dataset as `(samples, boxes, labels)` of IQ field `field`."""

    def __init__(self, mount, field, set=None):
        self.mount = str(mount)
        self.field = field
        self.set = set
        self._samples = None
        self._boxes = None

    def _open(self):
        if self._samples is not None:
            return
        base = column_path(self.mount, self.field)
        try:
            self._samples = ("npy", np.load(base + ".npy", mmap_mode="r"))
        except FileNotFoundError:
            offsets = np.load(base + ".offsets.npy")
            shapes = np.load(base + ".shapes.npy")
            raw = np.memmap(base + ".raw", dtype=np.uint8, mode="r")
            self._samples = ("ragged", (raw, offsets, shapes))
        self._boxes = self._read_boxes()

    def _read_boxes(self):
        """Each record's boxes and labels: {ordinal: (float64 (k, 4), [label, ...])}."""
        source = pa.memory_map(f"{self.mount}/columns/labels.arrow")
        table = pa.ipc.open_file(source).read_all()
        keep = pc.equal(table["field"], self.field)
        if self.set is None:
            keep = pc.and_(keep, pc.is_null(table["set"]))
        else:
            keep = pc.and_(keep, pc.equal(table["set"], self.set))
        keep = pc.and_(keep, pc.is_valid(table["sample_start"]))
        table = table.filter(keep)
        numbers = np.column_stack([
            table[name].to_numpy().astype(np.float64)
            for name in ("sample_start", "sample_count", "freq_lower_edge_hz", "freq_upper_edge_hz")
        ]) if table.num_rows else np.zeros((0, 4))
        labels = table["label"].cast(pa.utf8()).to_pylist()
        ordinals = table["ordinal"].to_numpy()
        out = {}
        # The table is sorted by ordinal: each record's boxes are one run of rows.
        starts = np.flatnonzero(np.r_[True, ordinals[1:] != ordinals[:-1]]) if len(ordinals) else []
        ends = list(starts[1:]) + [len(ordinals)]
        for start, end in zip(starts, ends):
            out[int(ordinals[start])] = (numbers[start:end], labels[start:end])
        return out

    def __len__(self):
        self._open()
        kind, value = self._samples
        return len(value) if kind == "npy" else len(value[2])

    def __getitem__(self, index):
        self._open()
        kind, value = self._samples
        if kind == "npy":
            samples = np.array(value[index])
        else:
            raw, offsets, shapes = value
            samples = raw[offsets[index]:offsets[index + 1]].view(np.complex64).reshape(shapes[index])
        numbers, labels = self._boxes.get(index, (np.zeros((0, 4)), []))
        return torch.from_numpy(samples), torch.from_numpy(np.array(numbers)), list(labels)


def collate(items):
    """Stacks the samples (equal shapes) and keeps boxes and labels per record: a batch is
    `(samples, [boxes, ...], [labels, ...])`."""
    samples, boxes, labels = zip(*items)
    return torch.stack(samples), list(boxes), list(labels)
