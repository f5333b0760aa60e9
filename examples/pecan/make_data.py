# Generates the PECAN-style example's data set once: small 3-D molecular graphs (a
# "pocket + ligand" of atoms) as one binary sample file each, read back by train.py.
"""Synthetic, seeded graph samples on disk.

Each sample is one file ``sample-NNNNN.bin`` (little-endian):

    magic  b"PCN1"
    int32  n_nodes, n_edges, n_feat, n_grid
    f32    node features   [n_nodes, n_feat]   (one-hot atom type + charge-like values)
    f32    coordinates     [n_nodes, 3]        (Angstrom-like)
    i32    edge index      [2, n_edges]        (pairs closer than the cutoff, both ways)
    f32    target          [1]                 (a smooth function of the geometry)
    f32    grid            [n_grid]            (per-sample surface grid, not read by the
                                                model: PDBspheres shards carry such
                                                fields too, and it gives the files the
                                                size that makes the page cache matter)

The edges are computed here, once, with the distance cutoff (as a PyG data set
pre-processes them), so the model never runs a data-dependent filter.
A ``MANIFEST.json`` written last records the parameters; train.py regenerates the data
when it is missing or was made with other parameters.
"""

import argparse
import ctypes
import json
import os
import struct
import sys

import torch

MAGIC = b"PCN1"
HEADER = struct.Struct("<4s4i")
FORMAT_VERSION = 2


def default_params(n_samples: int = 1024, seed: int = 0) -> dict:
    """The parameters that define a data set; equal parameters → equal bytes."""
    return {
        "format": FORMAT_VERSION,
        "n_samples": n_samples,
        "seed": seed,
        "n_feat": 16,
        "min_nodes": 24,
        "max_nodes": 64,
        "coord_scale": 1.0,
        "cutoff": 4.5,
        "target_scale": 25.0,
        "grid_floats": 32 * 1024,  # 128 KiB per sample
    }


def _sample(gen: torch.Generator, p: dict):
    n = int(torch.randint(p["min_nodes"], p["max_nodes"] + 1, (1,), generator=gen))
    n_types = p["n_feat"] - 2
    types = torch.randint(0, n_types, (n,), generator=gen)
    feat = torch.zeros(n, p["n_feat"])
    feat[torch.arange(n), types] = 1.0
    feat[:, n_types] = torch.randn(n, generator=gen) * 0.3  # partial charge
    feat[:, n_types + 1] = torch.rand(n, generator=gen)  # buriedness
    # Atoms in a blob of radius ~ n^(1/3), like a small pocket with its ligand: about
    # 6-7 neighbours per atom within the cutoff.
    coords = torch.randn(n, 3, generator=gen) * (p["coord_scale"] * n ** (1.0 / 3.0))
    dist = torch.cdist(coords, coords)
    close = (dist < p["cutoff"]) & ~torch.eye(n, dtype=torch.bool)
    edges = close.nonzero().t().contiguous().to(torch.int32)  # [2, E], both directions
    # Target: a contact score (type-weighted sum of exp(-d) over close pairs, per atom).
    weights = torch.linspace(-1.0, 1.0, n_types)
    w = weights[types]
    row, col = edges[0].long(), edges[1].long()
    score = (w[row] * w[col] * torch.exp(-dist[row, col])).sum() / n
    # Plus per-atom terms a mean-pooling readout can learn quickly (type and charge).
    score = p["target_scale"] * score + 4.0 * w.mean() + 4.0 * feat[:, n_types].mean()
    grid = torch.rand(p["grid_floats"], generator=gen)
    return feat, coords, edges, torch.tensor([float(score)]), grid


def encode(feat, coords, edges, target, grid) -> bytes:
    n, f = feat.shape
    head = HEADER.pack(MAGIC, n, edges.shape[1], f, grid.numel())
    parts = [
        feat.to(torch.float32).contiguous(),
        coords.to(torch.float32).contiguous(),
        edges.to(torch.int32).contiguous(),
        target.to(torch.float32).contiguous(),
        grid.to(torch.float32).contiguous(),
    ]
    # The tensors' own memory, copied once (little-endian on the x86/ARM machines we run
    # on); no numpy needed.
    return head + b"".join(
        ctypes.string_at(t.data_ptr(), t.numel() * t.element_size()) for t in parts
    )


def decode(buf: bytearray):
    """(features, coords, edge index [2,E] int64, target) of one sample file's bytes
    (a writable buffer: the tensors are views of it, not copies)."""
    magic, n, e, f, g = HEADER.unpack_from(buf, 0)
    if magic != MAGIC:
        raise ValueError("not a PCN1 sample file")
    off = HEADER.size
    feat = torch.frombuffer(buf, dtype=torch.float32, count=n * f, offset=off).view(n, f)
    off += 4 * n * f
    coords = torch.frombuffer(buf, dtype=torch.float32, count=n * 3, offset=off).view(n, 3)
    off += 4 * n * 3
    edges = torch.frombuffer(buf, dtype=torch.int32, count=2 * e, offset=off).view(2, e)
    off += 4 * 2 * e
    target = torch.frombuffer(buf, dtype=torch.float32, count=1, offset=off)
    off += 4
    if off + 4 * g != len(buf):
        raise ValueError(f"sample file has {len(buf)} bytes, expected {off + 4 * g}")
    return feat, coords, edges.long(), target


def sample_paths(data_dir: str, n_samples: int) -> list:
    return [os.path.join(data_dir, f"sample-{i:05d}.bin") for i in range(n_samples)]


def is_current(data_dir: str, params: dict) -> bool:
    try:
        with open(os.path.join(data_dir, "MANIFEST.json")) as fh:
            return json.load(fh) == params
    except (OSError, ValueError):
        return False


def generate(data_dir: str, params: dict, quiet: bool = False) -> None:
    """Writes every sample (fsync'd, so that train.py can later evict it from the page
    cache), then the manifest. Files are written under a temporary name and renamed."""
    os.makedirs(data_dir, exist_ok=True)
    manifest = os.path.join(data_dir, "MANIFEST.json")
    if os.path.exists(manifest):
        os.unlink(manifest)
    gen = torch.Generator().manual_seed(params["seed"])
    total = 0
    for path in sample_paths(data_dir, params["n_samples"]):
        blob = encode(*_sample(gen, params))
        tmp = path + ".tmp"
        with open(tmp, "wb") as fh:
            fh.write(blob)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        total += len(blob)
    with open(manifest + ".tmp", "w") as fh:
        json.dump(params, fh, indent=1, sort_keys=True)
    os.replace(manifest + ".tmp", manifest)
    if not quiet:
        print(
            f"wrote {params['n_samples']} samples, {total / 2**20:.1f} MiB, to {data_dir}",
            file=sys.stderr,
        )


def ensure(data_dir: str, params: dict) -> None:
    if not is_current(data_dir, params):
        generate(data_dir, params)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--data-dir", default=os.path.join(here, "data"))
    ap.add_argument("--samples", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--force", action="store_true", help="regenerate even if current")
    args = ap.parse_args()
    params = default_params(args.samples, args.seed)
    if args.force or not is_current(args.data_dir, params):
        generate(args.data_dir, params)
    else:
        print(f"{args.data_dir} is current", file=sys.stderr)


if __name__ == "__main__":
    main()
