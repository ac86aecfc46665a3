"""Hardware profiles: the one table of per-chip numbers the tuner works from.

Ascend profiles live in ``tuning/profiles/ascend.json`` (shared with the
AscendC kernels' ``arch`` header, which a test keeps in step with it).  Users
add or override profiles with a JSON or TOML file of the same schema, named by
the ``SGEMM_CUBE_PROFILES`` environment variable (several paths separated by
``os.pathsep``) or passed to :func:`load_profiles`.  GPU profiles are not
stored: :func:`cuda_profile` reads them from the device at run time.

Schema (version 1)::

    {"schema": 1,
     "profiles": {"<key>": {<hardware fields>, "blocking": {<kernel fields>}}}}

Hardware fields (all per AI core unless stated; bytes are exact buffer sizes):

========================  =====================================================
``name``                  display name, also the device key of tuning tables
``arch``                  SoC architecture tag (``dav-c100`` = 910A, ...)
``ai_cores``              number of AI (cube) cores on the chip
``clock_ghz``             cube clock, GHz
``l1_bytes``              L1 buffer (holds resident A blocks and B buffers)
``l0a_bytes``             L0A buffer (left cube operand)
``l0b_bytes``             L0B buffer (right cube operand)
``l0c_bytes``             L0C buffer (FP32 cube accumulators)
``ub_bytes``              unified buffer of the vector unit
``cube_block``            edge of the cube's fractal (16: Eq. 10 alignment)
``cube_fp16_tflops``      FP16 cube peak of the whole chip, TFLOP/s
``cube_fp32_tflops``      native FP32 cube peak, TFLOP/s, or ``null`` if none
``hbm_gbps``              main-memory bandwidth of the chip, GB/s (1e9 B/s)
``c_path``                on-chip buffers a C tile passes through on its way
                          from the cube to main memory: ``["l0c", "ub"]`` on
                          910A (no Fixpipe: L0C -> UB -> GM), ``["l0c"]`` on
                          910B (Fixpipe writes L0C straight to GM)
========================  =====================================================

Kernel-design fields (``blocking``), the constants of Eq. 8 and Eq. 10 that
come from how the SGEMM-cube kernel uses the buffers, not from the silicon:

=========================  ====================================================
``operand_bytes``          bytes of one streamed operand element (FP16: 2)
``l0_stages``              L0A/L0B ping-pong depth: a block may use only
                           ``l0a_bytes / l0_stages`` so the next one can load
                           while the cube works (910A: 64 KiB / 2 / 2 B =
                           64 x 256 elements, the paper's L0A/L0B bound)
``b_buffers``              B blocks held in L1 at once (2: double buffering)
``c_bytes_per_element``    bytes of C-path storage per element of a bm x bn
                           C tile.  910A: 6, the paper's Eq. 10 constant (one
                           FP32 accumulator, 4 B, plus 2 B of UB staging; the
                           paper does not break it down further).  910B: 8,
                           two FP32 L0C accumulators, because the termwise
                           order keeps A_hi B_hi and the correction sum apart
``c_reserved_bytes``       bytes of the smallest C-path buffer kept for other
                           uses (910A: 8 KiB of UB for scalars and split
                           scratch, giving the paper's 248 KiB)
``fused_terms``            ``false`` (the paper's Algorithm 1): one GEMM pass
                           per product term, each streaming one FP16 plane.
                           ``true``: one pass keeps the hi and lo planes of a
                           block together (then ``operand_bytes`` is 4 and
                           ``c_bytes_per_element`` counts every accumulator)
=========================  ====================================================

The shipped ``blocking`` rows describe the paper's kernel.  A kernel of
another design passes its own :class:`Blocking` (``choose_tiling(...,
blocking=...)``) rather than editing the hardware table.

The 910A row therefore reproduces Eq. 10 of the paper exactly; see
:func:`sgemm_cube.tuning.model.constraints`.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

__all__ = [
    "SCHEMA_VERSION",
    "Blocking",
    "OPTIONAL_PIPES",
    "Pipes",
    "Profile",
    "ProfileError",
    "cuda_profile",
    "get_profile",
    "list_profiles",
    "load_profiles",
    "parse_profiles",
]

SCHEMA_VERSION = 1
_ENV_PROFILES = "SGEMM_CUBE_PROFILES"
_C_PATH_BUFFERS = ("l0c", "ub")


class ProfileError(ValueError):
    """A profile file or entry does not follow the schema."""


@dataclass(frozen=True)
class Blocking:
    """Kernel-design constants of the blocking model (see module docstring)."""

    operand_bytes: int = 2
    l0_stages: int = 2
    b_buffers: int = 2
    c_bytes_per_element: int = 8
    c_reserved_bytes: int = 0
    fused_terms: bool = False


@dataclass(frozen=True)
class Pipes:
    """Per-core pipe rates and fixed costs of the event-driven model (:mod:`sgemm_cube.tuning.pipeline`).

    Rates are bytes per cube clock cycle of one AI core; costs are cycles;
    except the host's fields (:data:`OPTIONAL_PIPES`: microseconds, GB/s).
    ``sources`` says where each number comes from (a public file, "fitted"
    with the calibration that produced it, or "assumption").
    """

    mte2_hbm_bytes_per_cycle: float
    mte2_l2_bytes_per_cycle: float
    mte1_l0a_bytes_per_cycle: float
    mte1_l0b_bytes_per_cycle: float
    l0c_out_bytes_per_cycle: float
    ub_to_gm_bytes_per_cycle: float
    vector_bytes_per_cycle: float
    dma_head_cycles: float
    dma_head_below_bytes: float
    dma_min_burst_bytes: float
    mte1_start_cycles: float
    l2_bytes: float
    shared_l2_hit: float
    flag_latency_cycles: float
    host_readback_us: float | None = None
    d2h_gbps: float | None = None
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)

    def to_json(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
             if f.name != "sources" and not (f.name in OPTIONAL_PIPES and getattr(self, f.name) is None)}
        d["sources"] = dict(self.sources)
        return d


OPTIONAL_PIPES = ("host_readback_us", "d2h_gbps")
"""Fields of ``pipes`` a profile may leave out: the host's side of the guarded product's one read-back
(:func:`sgemm_cube.tuning.pipeline.predict_package` needs them; nothing else does).
``host_readback_us``: fixed cost, microseconds, of one small device -> host copy with the stream
synchronisation it implies (and the next launch issued from an empty queue); ``d2h_gbps``: the copy's
rate, GB/s.  The shipped values are assumptions with no measured source (their ``sources`` say so)."""


@dataclass(frozen=True)
class Profile:
    """One accelerator's parameters (see the module docstring for units).

    Attribute names are the JSON keys, so ``dataclasses.asdict(profile)``
    gives back the file's entry.
    """

    key: str
    name: str
    ai_cores: int
    clock_ghz: float
    l1_bytes: int
    l0a_bytes: int
    l0b_bytes: int
    l0c_bytes: int
    ub_bytes: int
    cube_fp16_tflops: float
    hbm_gbps: float
    arch: str = ""
    cube_block: int = 16
    cube_fp32_tflops: float | None = None
    c_path: tuple[str, ...] = ("l0c",)
    blocking: Blocking = field(default_factory=Blocking)
    pipes: Pipes | None = None

    @property
    def c_budget_bytes(self) -> int:
        """Bytes a C tile may occupy: the smallest C-path buffer less the reserve."""
        return min(getattr(self, f"{b}_bytes") for b in self.c_path) - self.blocking.c_reserved_bytes

    def to_json(self) -> dict[str, Any]:
        """The profile as a schema-1 JSON entry (without its key)."""
        d = dataclasses.asdict(self)
        d.pop("key")
        d["c_path"] = list(self.c_path)
        d["pipes"] = None if self.pipes is None else self.pipes.to_json()
        return d


_INT_FIELDS = ("ai_cores", "l1_bytes", "l0a_bytes", "l0b_bytes", "l0c_bytes", "ub_bytes", "cube_block")
_FLOAT_FIELDS = ("clock_ghz", "cube_fp16_tflops", "hbm_gbps")


def _positive_int(where: str, name: str, value: Any) -> int:
    # bool is an int subclass; "true" is never a buffer size.
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ProfileError(f"{where}: {name!r} must be a positive integer, got {value!r}")
    return value


def _positive_float(where: str, name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ProfileError(f"{where}: {name!r} must be a positive number, got {value!r}")
    return float(value)


def _parse_entry(key: str, entry: Any, where: str) -> Profile:
    where = f"{where}: profile {key!r}"
    if not isinstance(entry, Mapping):
        raise ProfileError(f"{where} must be an object")
    known = {f.name for f in dataclasses.fields(Profile)} - {"key"}
    unknown = set(entry) - known
    if unknown:
        raise ProfileError(f"{where}: unknown field(s) {sorted(unknown)}; known: {sorted(known)}")
    missing = [n for n in ("name", *_INT_FIELDS[:-1], *_FLOAT_FIELDS) if n not in entry]
    if missing:
        raise ProfileError(f"{where}: missing field(s) {missing}")
    kw: dict[str, Any] = {"key": key, "name": str(entry["name"]), "arch": str(entry.get("arch", ""))}
    for n in _INT_FIELDS:
        if n in entry:
            kw[n] = _positive_int(where, n, entry[n])
    for n in _FLOAT_FIELDS:
        kw[n] = _positive_float(where, n, entry[n])
    fp32 = entry.get("cube_fp32_tflops")
    kw["cube_fp32_tflops"] = None if fp32 is None else _positive_float(where, "cube_fp32_tflops", fp32)
    c_path = tuple(entry.get("c_path", ("l0c",)))
    if not c_path or any(b not in _C_PATH_BUFFERS for b in c_path):
        raise ProfileError(f"{where}: 'c_path' must list buffers out of {_C_PATH_BUFFERS}, got {c_path!r}")
    kw["c_path"] = c_path
    blocking = entry.get("blocking", {})
    if not isinstance(blocking, Mapping):
        raise ProfileError(f"{where}: 'blocking' must be an object")
    bknown = {f.name for f in dataclasses.fields(Blocking)}
    if set(blocking) - bknown:
        raise ProfileError(f"{where}: unknown blocking field(s) {sorted(set(blocking) - bknown)}")
    breserved = blocking.get("c_reserved_bytes", 0)
    if isinstance(breserved, bool) or not isinstance(breserved, int) or breserved < 0:
        raise ProfileError(f"{where}: 'c_reserved_bytes' must be a non-negative integer")
    fused = blocking.get("fused_terms", False)
    if not isinstance(fused, bool):
        raise ProfileError(f"{where}: 'fused_terms' must be true or false")
    kw["blocking"] = Blocking(
        **{n: _positive_int(where, n, v) for n, v in blocking.items() if n not in ("c_reserved_bytes", "fused_terms")},
        c_reserved_bytes=breserved,
        fused_terms=fused,
    )
    kw["pipes"] = _parse_pipes(entry.get("pipes"), where)
    profile = Profile(**kw)
    if profile.c_budget_bytes <= 0:
        raise ProfileError(f"{where}: 'c_reserved_bytes' leaves no room for a C tile")
    return profile


def _parse_pipes(entry: Any, where: str) -> Pipes | None:
    if entry is None:
        return None
    if not isinstance(entry, Mapping):
        raise ProfileError(f"{where}: 'pipes' must be an object")
    names = [f.name for f in dataclasses.fields(Pipes) if f.name != "sources"]
    unknown = set(entry) - set(names) - {"sources"}
    missing = [n for n in names if n not in entry and n not in OPTIONAL_PIPES]
    if unknown or missing:
        raise ProfileError(f"{where}: 'pipes' has unknown field(s) {sorted(unknown)} / lacks {missing}")
    kw: dict[str, Any] = {}
    for n in names:
        if n not in entry:  # an optional field left out
            continue
        v = entry[n]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ProfileError(f"{where}: pipes.{n} must be a non-negative number, got {v!r}")
        kw[n] = float(v)
    if not 0.0 <= kw["shared_l2_hit"] <= 1.0:
        raise ProfileError(f"{where}: pipes.shared_l2_hit must lie in [0, 1]")
    sources = entry.get("sources", {})
    if not isinstance(sources, Mapping) or not all(isinstance(v, str) for v in sources.values()):
        raise ProfileError(f"{where}: pipes.sources must map field names to strings")
    return Pipes(**kw, sources=dict(sources))


def parse_profiles(data: Any, *, source: str = "<data>") -> dict[str, Profile]:
    """Validate a schema-1 document and return its profiles by lower-case key.

    Raises
    ------
    ProfileError
        If the document or any entry does not follow the schema.
    """
    if not isinstance(data, Mapping) or data.get("schema") != SCHEMA_VERSION:
        raise ProfileError(f"{source}: not a schema-{SCHEMA_VERSION} profile file (need {{'schema': 1, ...}})")
    profiles = data.get("profiles")
    if not isinstance(profiles, Mapping) or not profiles:
        raise ProfileError(f"{source}: 'profiles' must be a non-empty object")
    return {str(k).lower(): _parse_entry(str(k).lower(), v, source) for k, v in profiles.items()}


def load_profiles(path: str | os.PathLike[str]) -> dict[str, Profile]:
    """Read a JSON (``.json``) or TOML (any other suffix) profile file.

    Returns the parsed profiles; they take effect for :func:`get_profile`
    only through ``SGEMM_CUBE_PROFILES`` or the ``extra`` argument.
    """
    path = Path(path)
    try:
        if path.suffix.lower() == ".json":
            data = json.loads(path.read_text(encoding="utf-8"))
        else:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # JSONDecodeError and TOMLDecodeError are ValueErrors
        raise ProfileError(f"{path}: cannot read profile file: {exc}") from exc
    return parse_profiles(data, source=str(path))


def _builtin() -> dict[str, Profile]:
    text = resources.files(__package__).joinpath("profiles", "ascend.json").read_text(encoding="utf-8")
    return parse_profiles(json.loads(text), source="tuning/profiles/ascend.json")


def list_profiles(*, extra: Mapping[str, Profile] | None = None) -> dict[str, Profile]:
    """All known profiles: built-in, then ``SGEMM_CUBE_PROFILES`` files, then ``extra``.

    Later sources override earlier ones with the same key.
    """
    profiles = _builtin()
    for p in filter(None, os.environ.get(_ENV_PROFILES, "").split(os.pathsep)):
        profiles.update(load_profiles(p))
    profiles.update(extra or {})
    return profiles


def get_profile(name: str | Profile, *, extra: Mapping[str, Profile] | None = None) -> Profile:
    """Look up a profile by key (``"910a"``) or display name (``"Ascend 910A"``).

    Case and the characters ``" -_"`` are ignored, so ``"Ascend910B"`` works.
    A :class:`Profile` is returned unchanged.

    Raises
    ------
    KeyError
        If no profile matches; the message lists the known keys.
    """
    if isinstance(name, Profile):
        return name
    profiles = list_profiles(extra=extra)

    def norm(s: str) -> str:
        return "".join(ch for ch in s.lower() if ch not in " -_")

    want = norm(name)
    for p in reversed(list(profiles.values())):  # later sources win
        if want in (norm(p.key), norm(p.name), "ascend" + norm(p.key)):
            return p
    raise KeyError(f"unknown hardware profile {name!r}; known: {sorted(profiles)}")


def cuda_profile(device: Any = None) -> dict[str, Any]:
    """Read a CUDA GPU's parameters from the device (needs torch with CUDA).

    Returns
    -------
    dict
        ``name``, ``sm_count``, ``capability`` (major, minor), ``total_memory_bytes``,
        ``l2_bytes`` and ``smem_per_block_bytes`` (opt-in maximum of shared
        memory per block; 0 where torch does not report it).

    Raises
    ------
    RuntimeError
        If torch is missing or no CUDA device is present.
    """
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is a test dependency
        raise RuntimeError("cuda_profile needs torch") from exc
    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA device available")
    props = torch.cuda.get_device_properties(device if device is not None else torch.cuda.current_device())
    return {
        "name": props.name,
        "sm_count": props.multi_processor_count,
        "capability": (props.major, props.minor),
        "total_memory_bytes": props.total_memory,
        "l2_bytes": getattr(props, "L2_cache_size", 0),
        "smem_per_block_bytes": getattr(props, "shared_memory_per_block_optin", 0),
    }
