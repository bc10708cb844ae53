"""Per-edge convolution kernels: direct (numba, nogil) and FFT (scipy.fft, GIL released).

Keras's Conv3D is a cross-correlation with 'valid' padding: out[z] = sum_a w[a] x[z + a].  For
one edge (one input channel, one output channel) of a batch, with x of shape (N, n0, n1, n2) and a
kernel of shape k = (k0, k1, k2), the output has L = n - k + 1 voxels per axis, and backward
needs two more products:

  forward        out = corr(x, w)                 (valid, size L)
  input grad     gx  = conv_full(g, w)            (full, size n = L + k - 1)
  weight grad    gw  = corr(x, g)                 (valid, size k), summed over the batch

Direct kernels loop in numba with ``nogil=True`` so threads of the task pool really run in
parallel; they accumulate into a buffer the caller passes (the convergent sum of a node).

In the frequency domain (FFT size m >= n per axis, padded at the end), the same three are
pointwise products with the spectra X = F(x), W = F(w), G = F(g) (ZNN's fft_filter_edge):

  forward        F(out) = X * conj(W), cropped to [:L]   (circular correlation; no wrap for z < L)
  input grad     F(gx)  = G * W,       cropped to [:n]   (full convolution has length n <= m)
  weight grad    F(gw)  = sum_batch X * conj(G), only [:k] of the inverse is needed

so every spectrum is computed once and reused by all the edges that touch it, and sums over
edges are taken in the frequency domain: one inverse FFT per node, not per edge.  The weight
gradient's inverse is pruned: after the inverse along axis 0 only k0 planes are kept, after
axis 1 only k1 rows (ZNNi's pruned FFTs), which cuts the per-edge inverse about threefold.
scipy.fft runs with workers=1 and releases the GIL.
"""

from __future__ import annotations

import numba
import numpy as np
import scipy.fft

_JIT = {"nogil": True, "cache": True, "fastmath": True}


@numba.njit(**_JIT)
def corr_valid_acc(x, w, out):
    """out += valid cross-correlation of x (N, n0, n1, n2) with w (k0, k1, k2)."""
    k0, k1, k2 = w.shape
    N, L0, L1, L2 = out.shape
    for b in range(N):
        for z in range(L0):
            for y in range(L1):
                o = out[b, z, y]
                for a in range(k0):
                    for c in range(k1):
                        row = x[b, z + a, y + c]
                        for d in range(k2):
                            wv = w[a, c, d]
                            for i in range(L2):
                                o[i] += wv * row[i + d]


@numba.njit(**_JIT)
def conv_full_acc(g, w, gx):
    """gx += full convolution of g (N, L0, L1, L2) with w: gx[z + a] += w[a] g[z]."""
    k0, k1, k2 = w.shape
    N, L0, L1, L2 = g.shape
    for b in range(N):
        for z in range(L0):
            for y in range(L1):
                grow = g[b, z, y]
                for a in range(k0):
                    for c in range(k1):
                        out = gx[b, z + a, y + c]
                        for d in range(k2):
                            wv = w[a, c, d]
                            for i in range(L2):
                                out[i + d] += wv * grow[i]


@numba.njit(**_JIT)
def corr_weight(x, g, k0, k1, k2):
    """Weight gradient of one edge: gw[a] = sum over batch and z of g[z] x[z + a].  Row by
    row (each pair of rows is read once for all k2 taps), summed in float64."""
    N, L0, L1, L2 = g.shape
    gw = np.zeros((k0, k1, k2), dtype=np.float64)
    for b in range(N):
        for z in range(L0):
            for y in range(L1):
                gr = g[b, z, y]
                for a in range(k0):
                    for c in range(k1):
                        xr = x[b, z + a, y + c]
                        for d in range(k2):
                            s = 0.0
                            for i in range(L2):
                                s += gr[i] * xr[i + d]
                            gw[a, c, d] += s
    return gw.astype(x.dtype)


@numba.njit(**_JIT)
def mad_conj(a, b, acc):
    """acc += a * conj(b) elementwise; a and acc (N, M) spectra, b (M,) a filter's."""
    N, M = acc.shape
    for n in range(N):
        for i in range(M):
            acc[n, i] += a[n, i] * b[i].conjugate()


@numba.njit(**_JIT)
def mad(a, b, acc):
    """acc += a * b elementwise; a (N, M), b (M,)."""
    N, M = acc.shape
    for n in range(N):
        for i in range(M):
            acc[n, i] += a[n, i] * b[i]


@numba.njit(**_JIT)
def batch_corr_spectrum(x, g):
    """sum over the batch of x[n] * conj(g[n]), both (N, M): the weight gradient's spectrum."""
    N, M = x.shape
    out = np.zeros(M, dtype=x.dtype)
    for n in range(N):
        for i in range(M):
            out[i] += x[n, i] * g[n, i].conjugate()
    return out


def fft_shape(n) -> tuple[int, int, int]:
    """FFT size per axis: the next size pocketfft does fast (ZNN pads to good sizes too)."""
    return tuple(scipy.fft.next_fast_len(int(s), real=True) for s in n)


def rfft3(x, m):
    """Spectrum of x (N, n0, n1, n2) zero-padded at the end to m, flattened to (N, M)."""
    spec = scipy.fft.rfftn(x, s=m, axes=(1, 2, 3), workers=1)
    return spec.reshape(spec.shape[0], -1)


def filter_spectrum(w, m):
    """Spectrum of one kernel (k0, k1, k2) padded to m, flattened to (M,)."""
    return scipy.fft.rfftn(w, s=m, workers=1).reshape(-1)


def irfft3_crop(spec, m, keep, out=None):
    """Inverse of an (N, M) spectrum of an m-sized volume, cropped to [:keep] per axis (into
    `out` when given)."""
    N = spec.shape[0]
    full = scipy.fft.irfftn(spec.reshape(N, m[0], m[1], m[2] // 2 + 1), s=m, axes=(1, 2, 3),
                            workers=1)
    crop = full[:, :keep[0], :keep[1], :keep[2]]
    if out is None:
        return np.ascontiguousarray(crop)
    out[...] = crop
    return out


# TensorFlow's CPU MaxPool3DGrad counts inputs within this (absolute) distance of the maximum
# as maxima.
TF_POOL_TIE = 1e-5
# Roundoff of a float32 FFT convolution, relative to the largest output: about 1e-7 per
# operation, a few times that through the transforms.
ROUNDOFF = 1e-6


def snap_roundoff(z):
    """Set outputs of an FFT convolution within roundoff of zero to exactly zero, in place.

    Where every input of a window is zero (dead ReLUs, zero padding) a direct convolution gives
    exactly 0, and so does TensorFlow; the FFT gives +-1e-10, and the sign of that noise would
    decide ReLU's derivative (and ties of a max filter).  Values below ROUNDOFF x the largest
    output cannot be told from zero by the FFT anyway."""
    limit = ROUNDOFF * float(np.abs(z).max(initial=0.0))
    z[np.abs(z) <= limit] = 0.0
    return z


def irfft3_pruned(spec, m, keep):
    """Inverse of one (M,) spectrum, computing only the [:keep] corner (the weight gradient)."""
    s = spec.reshape(m[0], m[1], m[2] // 2 + 1)
    s = scipy.fft.ifft(s, axis=0, workers=1)[:keep[0]]
    s = scipy.fft.ifft(s, axis=1, workers=1)[:, :keep[1]]
    return np.ascontiguousarray(scipy.fft.irfft(s, n=m[2], axis=2, workers=1)[:, :, :keep[2]])


# A node's edges in one call (granularity "node"): one release of the GIL for all of them, where
# a call per edge would take and drop it once per edge.
@numba.njit(**_JIT)
def corr_valid_node(xs, ws, j, out):
    """out += sum over i of corr(xs[i], ws[i, j]): node j's in-edges; xs (cin, N, n0, n1, n2),
    ws (cin, cout, k0, k1, k2)."""
    for i in range(xs.shape[0]):
        corr_valid_acc(xs[i], ws[i, j], out)


@numba.njit(**_JIT)
def conv_full_node(ds, ws, i, gx):
    """gx += sum over j of conv_full(ds[j], ws[i, j]): input node i's gradient from every output
    node's delta; ds (cout, N, L0, L1, L2)."""
    for j in range(ds.shape[0]):
        conv_full_acc(ds[j], ws[i, j], gx)


@numba.njit(**_JIT)
def corr_weight_node(x, ds, k0, k1, k2, out):
    """out[..., j] = corr_weight(x, ds[j]) for every j: input node i's weight gradients, out a
    (k0, k1, k2, cout) view of the layer's."""
    for j in range(ds.shape[0]):
        out[:, :, :, j] = corr_weight(x, ds[j], k0, k1, k2)


@numba.njit(**_JIT)
def maxpool(x, p0, p1, p2, s0, s1, s2):
    """Max pooling of x (N, n0, n1, n2), 'valid', strides s (stride 1 is ZNN's max filter)."""
    N, n0, n1, n2 = x.shape
    o0 = (n0 - p0) // s0 + 1
    o1 = (n1 - p1) // s1 + 1
    o2 = (n2 - p2) // s2 + 1
    out = np.empty((N, o0, o1, o2), dtype=x.dtype)
    for b in range(N):
        for z in range(o0):
            for y in range(o1):
                for i in range(o2):
                    best = x[b, z * s0, y * s1, i * s2]
                    for a in range(p0):
                        for c in range(p1):
                            for d in range(p2):
                                v = x[b, z * s0 + a, y * s1 + c, i * s2 + d]
                                if v > best:
                                    best = v
                    out[b, z, y, i] = best
    return out


@numba.njit(**_JIT)
def maxpool_grad(x, out, g, p0, p1, p2, s0, s1, s2, tol):
    """Gradient of max pooling: each output's gradient goes, whole, to *every* input of its
    window within ``tol`` below the maximum.  With tol = TF_POOL_TIE (1e-5) this is
    TensorFlow's CPU MaxPool3DGrad (its select on |in - out| < 1e-5), so the gradients agree
    where ties occur, as they do where a max filter follows another; ZNN's own max filter
    routes to one voxel."""
    N, o0, o1, o2 = g.shape
    gx = np.zeros(x.shape, dtype=g.dtype)
    for b in range(N):
        for z in range(o0):
            for y in range(o1):
                for i in range(o2):
                    best = out[b, z, y, i] - tol
                    gv = g[b, z, y, i]
                    for a in range(p0):
                        for c in range(p1):
                            for d in range(p2):
                                if x[b, z * s0 + a, y * s1 + c, i * s2 + d] > best:
                                    gx[b, z * s0 + a, y * s1 + c, i * s2 + d] += gv
    return gx
