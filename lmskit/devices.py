"""Device models for the simulator: memory and its limits, compute, memory bandwidth, host link.

Presets are the papers' machines and the one measured here:
- "p100-16gb": Tesla P100 SXM2 16 GB on Power8 (Minsky), NVLink 1.0, 80 GB/s duplex (40 each
  way): the TFLMS papers' machine.
- "v100-16gb" / "v100-32gb": Tesla V100 SXM2 on Power9 (AC922), NVLink 2.0, 150 GB/s duplex
  (75 each way); IBM's Keras ResNet-50 example ran on the 16 GB one (2.88x the pixels of one
  image at batch 1 with v1: 2300^2 -> 3900^2, TF 1.12).
- "h100-80gb-pcie": H100 PCIe 80 GB, PCIe Gen5, 54 GB/s each way (pinned copies measured here).
- "cpu-here" (when lmskit/data/calibration.json has it): one core of this machine's CPU,
  calibrated by lmskit.calibrate from TF's profiler (four coefficients per op type and a
  fixed cost per step).

Limits (what a real run keeps back):
- host_memory_bytes: the pinned host memory LMS may use for swapped tensors. TFLMS v2 caps it
  with TF_GPU_HOST_MEM_LIMIT_IN_MB, 64 GiB by default; presets read that variable.
- reserve_bytes: device memory the step cannot use: the CUDA context, cuDNN's convolution
  workspace and the allocator's own slack. allocator_rounding rounds every buffer up (TF's BFC
  allocator hands out multiples of 256 bytes).
A step fits when its device peak <= memory - reserve and its host peak <= host_memory_bytes.

Time: a compute op is a roofline (FLOPs at peak x compute_efficiency, bytes at bandwidth x
bandwidth_efficiency) scaled by a per-op-type factor from calibration, plus a launch overhead;
the CPU preset weighs the two roofline terms separately (a x compute + b x memory + c, fitted per
op type), since on a CPU neither bound hides the other.
A copy takes copy_latency_s + bytes / link bandwidth, and only duplex_efficiency of it while the
other direction is busy too (contention on the link and the host's memory). The efficiencies are
calibrated against measured step times (lmskit.calibrate; the numbers are in calibration.json).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import numbers
import os
from dataclasses import dataclass
from pathlib import Path

GB = 10**9
GiB = 2**30
MiB = 2**20
CALIBRATION = Path(__file__).parent / "data" / "calibration.json"


def host_limit_from_env(default_mb: int = 64 * 1024) -> int:
    """The host-memory cap TFLMS v2 reads: TF_GPU_HOST_MEM_LIMIT_IN_MB (64 GiB unset)."""
    raw = os.environ.get("TF_GPU_HOST_MEM_LIMIT_IN_MB", "")
    try:
        mb = int(raw) if raw.strip() else default_mb
    except ValueError:
        raise ValueError(f"TF_GPU_HOST_MEM_LIMIT_IN_MB={raw!r} is not an integer") from None
    if mb <= 0:
        raise ValueError(f"TF_GPU_HOST_MEM_LIMIT_IN_MB must be positive, got {mb}")
    return mb * MiB


def _number(device_name: str, field: str, v, low: float, high: float = math.inf,
            low_open: bool = True) -> None:
    """One field: a real, finite number in (low, high] (or [low, high] when not low_open)."""
    try:   # an int too large for a float (10**400) is as unusable as inf: times divide it
        ok = (not isinstance(v, bool) and isinstance(v, numbers.Real)
              and math.isfinite(float(v)) and (v > low if low_open else v >= low) and v <= high)
    except OverflowError:
        ok = False
    if not ok:
        bound = f"in ({low:g}, {high:g}]" if high != math.inf else (
            "a positive number" if low_open else f"a number >= {low:g}")
        raise ValueError(f"device {device_name!r}: {field} must be {bound} (finite), got {v!r}")


def check_device_fields(dev) -> None:
    """The one validation of a Device's numbers, run by the constructor and so by every preset,
    calibration override (dataclasses.replace), with_memory, scaled and custom: a NaN or an
    infinity anywhere would turn every time or size it touches into NaN/inf, and the simulator's
    max() would then answer a step time of 0 rather than fail."""
    for f in ("memory_bytes", "flops", "memory_bandwidth", "h2d_bandwidth", "d2h_bandwidth",
              "host_memory_bytes", "allocator_rounding"):
        _number(dev.name, f, getattr(dev, f), 0)
    for f in ("compute_efficiency", "bandwidth_efficiency", "duplex_efficiency"):
        _number(dev.name, f, getattr(dev, f), 0, 1)
    for f in ("launch_overhead_s", "copy_latency_s", "reserve_bytes", "alloc_wait_s",
              "step_overhead_s"):
        _number(dev.name, f, getattr(dev, f), 0, low_open=False)
    if dev.reserve_bytes >= dev.memory_bytes:
        raise ValueError(f"device {dev.name!r}: reserve_bytes ({dev.reserve_bytes}) leaves "
                         f"nothing of memory_bytes ({dev.memory_bytes})")
    for entry in dev.type_factor:
        try:
            op_type, v = entry
            coefs = (v,) if isinstance(v, numbers.Real) else tuple(v)
            if not 1 <= len(coefs) <= 4:
                raise ValueError
        except (TypeError, ValueError):
            raise ValueError(f"device {dev.name!r}: type_factor entries must be (op type, factor), "
                             f"(op type, (factor, seconds per op)) or (op type, (compute factor, "
                             f"memory factor, seconds per op[, patch factor])), got {entry!r}"
                             ) from None
        names = {1: ("factor",), 2: ("factor", "seconds per op"),
                 3: ("compute factor", "memory factor", "seconds per op"),
                 4: ("compute factor", "memory factor", "seconds per op",
                     "patch factor")}[len(coefs)]
        for what, x in zip(names, coefs, strict=True):
            _number(dev.name, f"type_factor[{op_type!r}] {what}", x, 0, low_open=False)


@dataclass(frozen=True)
class Device:
    name: str
    memory_bytes: int            # device memory
    flops: float                 # peak FLOP/s of the kernels' number format
    memory_bandwidth: float      # device memory bytes/s
    h2d_bandwidth: float         # host -> device link bytes/s (swap-in)
    d2h_bandwidth: float         # device -> host link bytes/s (swap-out)
    host_memory_bytes: int = 64 * GiB   # pinned host memory swapping may use
    link: str = ""
    compute_efficiency: float = 0.5
    bandwidth_efficiency: float = 0.8
    launch_overhead_s: float = 4e-6   # per kernel; bookkeeping ops (Const, Shape, ...) are free
    reserve_bytes: int = 0            # CUDA context + conv workspace + allocator slack
    allocator_rounding: int = 1       # every buffer rounded up to a multiple of this
    copy_latency_s: float = 0.0       # per copy (DMA set-up, synchronisation)
    duplex_efficiency: float = 1.0    # share of a copy's bandwidth while the other way is busy
    # ((op type, coefficients), ...) from calibration. Two forms: (factor, per-op seconds): the
    # op takes max(compute, memory roofline) x factor + per-op seconds, a bare float being
    # (factor, 0); or (a, b, c[, d]), the CPU's form: a x compute roofline + b x memory
    # roofline + c seconds (+ d x a convolution's patch-matrix bytes over the memory bandwidth,
    # simulate.op_patch_bytes). Launch overhead comes on top of either.
    type_factor: tuple = ()
    calibrated: str = ""              # what the efficiencies were fitted to
    # How long an allocation that does not fit may wait for frees before the step fails (TF's
    # BFC allocator retries for up to 10 s, woken by deallocations); 0: out of memory at once.
    alloc_wait_s: float = 0.0
    # Fixed cost of one step outside its ops (the framework's call: Python, dispatch, feeding
    # the inputs, starting the executor); measured on the CPU preset by a near-empty step.
    step_overhead_s: float = 0.0

    def __post_init__(self):
        check_device_fields(self)

    @property
    def usable_bytes(self) -> int:
        """Device memory the step may use: memory - reserve (the default budget)."""
        return int(self.memory_bytes - self.reserve_bytes)

    def factor(self, op_type: str) -> tuple[float, float]:
        """(time factor on the roofline, extra seconds per op) for an op type (for a
        three-coefficient entry: its compute factor and its seconds per op)."""
        v = _factors(self.type_factor).get(op_type, 1.0)
        if isinstance(v, (int, float)):
            return float(v), 0.0
        return float(v[0]), float(v[1] if len(v) == 2 else v[2])

    def split_factors(self, op_type: str) -> tuple[float, float, float, float] | None:
        """(a, b, c, d) when the op type has a three- or four-coefficient entry (time = a x
        compute roofline + b x memory roofline + c + d x the patch matrix's bytes over the
        memory bandwidth; d = 0 in the three-coefficient form), else None."""
        v = _factors(self.type_factor).get(op_type)
        if v is None or isinstance(v, (int, float)) or len(v) < 3:
            return None
        return float(v[0]), float(v[1]), float(v[2]), float(v[3]) if len(v) == 4 else 0.0

    def with_memory(self, memory_bytes: int, reserve_bytes: int | None = None) -> Device:
        """The same device with another memory size (e.g. an H100 capped at 16 GiB). The reserve
        stays unless given, or unless it would take half the new memory or more: then it
        shrinks in proportion (a smoke-size device)."""
        _number(self.name, "memory_bytes", memory_bytes, 0)
        if reserve_bytes is None:
            reserve_bytes = self.reserve_bytes
            if 2 * reserve_bytes >= memory_bytes:
                reserve_bytes = int(reserve_bytes * memory_bytes / self.memory_bytes)
        name = (f"{self.name}@{memory_bytes / GiB:.0f}GiB" if memory_bytes >= GiB
                else f"{self.name}@{memory_bytes / MiB:.0f}MiB")
        return dataclasses.replace(self, name=name, memory_bytes=int(memory_bytes),
                                   reserve_bytes=int(reserve_bytes))

    def scaled(self, factor: float, name: str | None = None) -> Device:
        """Memory, reserve and host limit all scaled (smoke-size notebooks shrink the model and
        the device together)."""
        _number(self.name, "scaled factor", factor, 0)
        return dataclasses.replace(
            self, name=name or f"{self.name}x{factor:g}",
            memory_bytes=int(self.memory_bytes * factor),
            reserve_bytes=int(self.reserve_bytes * factor),
            host_memory_bytes=max(1, int(self.host_memory_bytes * factor)))


@functools.cache
def _factors(pairs: tuple) -> dict:
    return dict(pairs)


def _calibration() -> dict:
    try:
        return json.loads(CALIBRATION.read_text())
    except FileNotFoundError:
        return {}


def _build_presets() -> dict[str, Device]:
    host = host_limit_from_env()
    # CUDA context (~300 MiB on these cards) + cuDNN workspace TF allows by default for the
    # fastest algorithms (a few hundred MiB) + BFC slack: about 0.75 GiB on a 16 GB card.
    gpu = dict(host_memory_bytes=host, reserve_bytes=768 * MiB, allocator_rounding=256,
               copy_latency_s=10e-6, duplex_efficiency=0.9)
    fitted = _calibration().get("devices", {})
    presets = {
        # fp32 peaks (no tensor cores in TF 1's fp32 path); the H100 runs TF32 tensor cores,
        # which PyTorch uses for fp32 convolutions by default (the measured anchor).
        "p100-16gb": Device("p100-16gb", 16 * GiB, 10.6e12, 732 * GB, 40 * GB, 40 * GB,
                            link="NVLink 1.0 (Power8), 40 GB/s each way", **gpu),
        "v100-16gb": Device("v100-16gb", 16 * GiB, 15.7e12, 900 * GB, 75 * GB, 75 * GB,
                            link="NVLink 2.0 (Power9), 75 GB/s each way", **gpu),
        "v100-32gb": Device("v100-32gb", 32 * GiB, 15.7e12, 900 * GB, 75 * GB, 75 * GB,
                            link="NVLink 2.0 (Power9), 75 GB/s each way", **gpu),
        "h100-80gb-pcie": Device("h100-80gb-pcie", 80 * GiB, 378e12, 2000 * GB, 54 * GB, 54 * GB,
                                 link="PCIe Gen5, 54 GB/s each way (measured, pinned)", **gpu),
    }
    for name, fields in fitted.items():
        fields = dict(fields)
        if "type_factor" in fields:
            fields["type_factor"] = tuple(sorted(
                (t, v if isinstance(v, (int, float)) else tuple(v))
                for t, v in fields["type_factor"].items()))
        if name in presets:
            presets[name] = dataclasses.replace(presets[name], **fields)
        else:
            presets[name] = Device(name=name, **fields)
    return presets


PRESETS = _build_presets()


def get_device(device) -> Device:
    """A preset by name, or a Device passed through (the custom case)."""
    if isinstance(device, Device):
        return device
    try:
        return PRESETS[device]
    except (KeyError, TypeError):
        raise ValueError(f"unknown device {device!r}: presets are {sorted(PRESETS)}, or pass "
                         "lmskit.devices.Device(...) for a custom one") from None


def custom(name: str, memory_gb: float, tflops: float, memory_bandwidth_gbs: float,
           link_gbs: float, **kw) -> Device:
    """A custom device in everyday units (GB = 10^9 bytes, link speed each way)."""
    _number(name, "memory_bytes", memory_gb * GB, 0)   # before int(): inf has no int
    return Device(name, int(memory_gb * GB), tflops * 1e12, memory_bandwidth_gbs * GB,
                  link_gbs * GB, link_gbs * GB, **kw)
