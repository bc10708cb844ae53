"""Device models for the simulator: memory, peak compute, memory bandwidth, host link.

Presets are the papers' machines and the one measured here:
- "p100-16gb": Tesla P100 SXM2 16 GB on Power8 (Minsky), NVLink 1.0, 80 GB/s duplex (40 each
  way): the TFLMS papers' machine.
- "v100-32gb": Tesla V100 SXM2 32 GB on Power9 (AC922), NVLink 2.0, 150 GB/s duplex (75 each way).
- "h100-80gb-pcie": H100 PCIe 80 GB, PCIe Gen5, 54 GB/s each way (pinned copies measured here).
Peak FLOP/s and bandwidths are vendor figures (fp32, no tensor cores); the efficiency factors say
how much of them real kernels reach (ResNet-50 trains at about half of peak FLOP/s).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

GB = 10**9
GiB = 2**30


@dataclass(frozen=True)
class Device:
    name: str
    memory_bytes: int            # device memory
    flops: float                 # peak fp32 FLOP/s
    memory_bandwidth: float      # device memory bytes/s
    h2d_bandwidth: float         # host -> device link bytes/s (swap-in)
    d2h_bandwidth: float         # device -> host link bytes/s (swap-out)
    host_memory_bytes: int = 512 * GiB
    link: str = ""
    compute_efficiency: float = 0.5
    bandwidth_efficiency: float = 0.8
    launch_overhead_s: float = 4e-6   # per kernel; bookkeeping ops (Const, Shape, ...) are free

    def with_memory(self, memory_bytes: int) -> Device:
        """The same device with another memory size (e.g. an H100 capped at 16 GiB)."""
        return dataclasses.replace(self, name=f"{self.name}@{memory_bytes / GiB:.0f}GiB",
                                   memory_bytes=int(memory_bytes))


PRESETS = {
    "p100-16gb": Device("p100-16gb", 16 * GiB, 10.6e12, 732 * GB, 40 * GB, 40 * GB,
                        link="NVLink 1.0 (Power8), 40 GB/s each way"),
    "v100-32gb": Device("v100-32gb", 32 * GiB, 15.7e12, 900 * GB, 75 * GB, 75 * GB,
                        link="NVLink 2.0 (Power9), 75 GB/s each way"),
    "h100-80gb-pcie": Device("h100-80gb-pcie", 80 * GiB, 51.2e12, 2000 * GB, 54 * GB, 54 * GB,
                             link="PCIe Gen5, 54 GB/s each way (measured, pinned)"),
}


def get_device(device) -> Device:
    """A preset by name, or a Device passed through (the custom case)."""
    if isinstance(device, Device):
        return device
    try:
        return PRESETS[device]
    except KeyError:
        raise ValueError(f"unknown device {device!r}: presets are {sorted(PRESETS)}, or pass "
                         "lmskit.devices.Device(...) for a custom one") from None


def custom(name: str, memory_gb: float, tflops: float, memory_bandwidth_gbs: float,
           link_gbs: float, **kw) -> Device:
    """A custom device in everyday units (GB = 10^9 bytes, link speed each way)."""
    return Device(name, int(memory_gb * GB), tflops * 1e12, memory_bandwidth_gbs * GB,
                  link_gbs * GB, link_gbs * GB, **kw)
