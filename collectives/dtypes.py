"""Data types and reduction ops, named as nccl-tests prints them (``float``, ``half``, ``bfloat16``).

Users may type the common aliases (fp32, bf16, fp16, int8 ...); rows and tables always carry the
canonical nccl-tests name so logs from both tools line up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class DType:
    name: str  # nccl-tests name
    torch_name: str  # the attribute of ``torch``: resolved in the ranks only (see torch_dtype)
    size: int  # bytes per element
    is_float: bool
    max_exact: float  # largest integer the type holds exactly (for the correctness check)

    @property
    def torch_dtype(self) -> torch.dtype:
        """The torch dtype. Imported here, not at the module's top: the coordinator and the planner
        read names and sizes and must not pay torch's 1.5-2.5 s import for them."""
        import torch

        return getattr(torch, self.torch_name)


_DTYPES = [
    DType("int8", "int8", 1, False, 127),
    DType("uint8", "uint8", 1, False, 255),
    DType("int32", "int32", 4, False, 2**31 - 1),
    DType("uint32", "uint32", 4, False, 2**32 - 1),
    DType("int64", "int64", 8, False, 2**63 - 1),
    DType("uint64", "uint64", 8, False, 2**64 - 1),
    DType("half", "float16", 2, True, 2048),
    DType("float", "float32", 4, True, 2**24),
    DType("double", "float64", 8, True, 2**53),
    DType("bfloat16", "bfloat16", 2, True, 256),
]
DTYPES: dict[str, DType] = {d.name: d for d in _DTYPES}
_ALIASES = {
    "fp32": "float",
    "float32": "float",
    "f32": "float",
    "fp16": "half",
    "float16": "half",
    "f16": "half",
    "bf16": "bfloat16",
    "fp64": "double",
    "float64": "double",
    "f64": "double",
    "char": "int8",
    "int": "int32",
    "uint": "uint32",
}
# gloo cannot reduce unsigned 32/64-bit integers; NCCL can.
GLOO_UNSUPPORTED = {"uint32", "uint64"}

OPS = ("sum", "prod", "max", "min", "avg")


def get_dtype(name: str) -> DType:
    """Resolve a dtype name or alias; ValueError lists the valid names."""
    key = _ALIASES.get(name.lower(), name.lower())
    if key not in DTYPES:
        raise ValueError(f"unknown dtype {name!r}; choose from {', '.join(DTYPES)} (or fp32, bf16, fp16 ...)")
    return DTYPES[key]


def get_op(name: str) -> str:
    key = name.lower()
    if key not in OPS:
        raise ValueError(f"unknown reduction op {name!r}; choose from {', '.join(OPS)}")
    return key


def reduce_op(name: str) -> object:
    """The torch.distributed ReduceOp for an op name."""
    import torch.distributed as dist

    return {
        "sum": dist.ReduceOp.SUM,
        "prod": dist.ReduceOp.PRODUCT,
        "max": dist.ReduceOp.MAX,
        "min": dist.ReduceOp.MIN,
        "avg": dist.ReduceOp.AVG,
    }[name]
