# Emulates backend/cuda/attention/sink_attention_mma.cu for one query on the CPU (numpy): the
# same swizzled shared-memory layout, ldmatrix and mma.sync fragment layouts (PTX ISA), tiles,
# masking and online softmax, against plain attention with a sink. It checks the kernel's index
# math where no GPU is at hand; keep its expressions in step with the kernel's. Not in CI.
# Run: /usr/bin/python3 tests/emulation/sink_attention_mma_emu.py (Debian's python3-numpy).
# Swapping an ldmatrix row/column term, or .trans for the output's keys, fails it.
import numpy as np
rng = np.random.default_rng(0)
H, D, TILE = 64, 512, 64
DC, TC = D // 8, TILE // 8

def bf16(x):
    x = np.atleast_1d(np.asarray(x, dtype=np.float32))
    b = x.view(np.uint32).astype(np.uint64)
    b = (b + np.uint64(0x7FFF) + ((b >> np.uint64(16)) & np.uint64(1))) & np.uint64(0xFFFF0000)
    r = b.astype(np.uint32).view(np.float32)
    return r if r.size > 1 else r[0]

def swz(row, col, chunks):
    return row * chunks * 8 + (((col >> 3) ^ (row & 7)) << 3) + (col & 7)

def ldmatrix_x4(smem, addr_of_lane, trans=False):
    # addr_of_lane(l) -> element index of the row start for lane l (matrix l//8, row l%8)
    regs = np.zeros((32, 4, 2), dtype=np.float32)
    for i in range(4):
        rows = [addr_of_lane(8 * i + r) for r in range(8)]
        m = np.array([[smem[rows[r] + c] for c in range(8)] for r in range(8)], dtype=np.float32)
        if trans: m = m.T
        for l in range(32):
            regs[l, i, 0] = m[l // 4, 2 * (l % 4)]
            regs[l, i, 1] = m[l // 4, 2 * (l % 4) + 1]
    return regs

def mma(c, a, b0, b1):
    # c: (32,4); a: (32,4,2); b0,b1: (32,2)
    A = np.zeros((16, 16), np.float32); B = np.zeros((16, 8), np.float32)
    for l in range(32):
        g, t = l // 4, l % 4
        A[g, 2*t:2*t+2] = a[l, 0]; A[g+8, 2*t:2*t+2] = a[l, 1]
        A[g, 2*t+8:2*t+10] = a[l, 2]; A[g+8, 2*t+8:2*t+10] = a[l, 3]
        B[2*t:2*t+2, g] = b0[l]; B[2*t+8:2*t+10, g] = b1[l]
    Dm = A.astype(np.float64) @ B.astype(np.float64)
    for l in range(32):
        g, t = l // 4, l % 4
        c[l, 0] += Dm[g, 2*t]; c[l, 1] += Dm[g, 2*t+1]
        c[l, 2] += Dm[g+8, 2*t]; c[l, 3] += Dm[g+8, 2*t+1]

def run(nkeys, scale=1/np.sqrt(512)):
    q = rng.standard_normal((H, D)).astype(np.float32)
    keys = rng.standard_normal((nkeys, D)).astype(np.float32)
    sinks = rng.standard_normal(H).astype(np.float32)
    # reference
    logits = (q.astype(np.float64) @ keys.T.astype(np.float64)) * scale
    mx = np.maximum(logits.max(1), sinks)
    p = np.exp(logits - mx[:, None]); den = p.sum(1) + np.exp(sinks - mx)
    ref = (p @ keys.astype(np.float64)) / den[:, None]
    # kernel emulation
    qs = np.zeros(H * D, np.float32)
    qb = bf16(q.reshape(-1)).reshape(H, D)
    for r in range(H):
        for c in range(D): qs[swz(r, c, DC)] = qb[r, c]
    o = {w: np.zeros((32, 32, 4), np.float64) for w in range(8)}
    m = {w: np.full((32, 2), -3.4e38) for w in range(8)}
    lsum = {w: np.zeros((32, 2)) for w in range(8)}
    for k0 in range(0, nkeys, TILE):
        nk = min(TILE, nkeys - k0)
        ks = np.zeros(TILE * D, np.float32)
        kb = bf16(keys[k0:k0+nk].reshape(-1)).reshape(nk, D)
        for r in range(nk):
            for c in range(D):
                ks[swz(r, c, DC)] = kb[r, c]
        red = np.zeros(4 * H, np.float32)
        sc = {}
        for w in range(8):
            hg, half = w & 3, w >> 2
            s = np.zeros((4, 32, 4))
            for kk in range(D // 16):
                af = ldmatrix_x4(qs, lambda l: swz(hg*16 + ((l>>3)&1)*8 + (l&7), kk*16 + ((l>>3)>>1)*8, DC))
                for np_ in range(2):
                    bf = ldmatrix_x4(ks, lambda l: swz(half*32 + np_*16 + ((l>>3)>>1)*8 + (l&7), kk*16 + ((l>>3)&1)*8, DC))
                    mma(s[2*np_], af, bf[:, 0], bf[:, 1]); mma(s[2*np_+1], af, bf[:, 2], bf[:, 3])
            mx_lo = np.full(32, -3.4e38); mx_hi = np.full(32, -3.4e38)
            for l in range(32):
                t = l & 3
                for n in range(4):
                    for j in range(2):
                        valid = half*32 + n*8 + 2*t + j < nk
                        s[n, l, j] = s[n, l, j]*scale if valid else -3.4e38
                        s[n, l, 2+j] = s[n, l, 2+j]*scale if valid else -3.4e38
                        mx_lo[l] = max(mx_lo[l], s[n, l, j]); mx_hi[l] = max(mx_hi[l], s[n, l, 2+j])
            for l in range(32):  # quad reduce
                base = l & ~3
                mx_lo[l] = max(mx_lo[base:base+4].max(), mx_lo[l]); mx_hi[l] = max(mx_hi[base:base+4].max(), mx_hi[l])
            for l in range(0, 32, 4):
                g = l >> 2
                red[half*H + hg*16 + g] = mx_lo[l]; red[half*H + hg*16 + g + 8] = mx_hi[l]
            sc[w] = s
        ps = np.zeros(H * TILE, np.float32)
        new = {}
        for w in range(8):
            hg, half = w & 3, w >> 2
            s = sc[w]; nl = np.zeros((32, 2)); sums = np.zeros((32, 2))
            for l in range(32):
                g, t = l >> 2, l & 3
                rl, rh = hg*16 + g, hg*16 + g + 8
                nlo = max(m[w][l, 0], red[rl], red[H + rl]); nhi = max(m[w][l, 1], red[rh], red[H + rh])
                nl[l] = (nlo, nhi)
                for n in range(4):
                    p0, p1 = np.exp(s[n, l, 0] - nlo), np.exp(s[n, l, 1] - nlo)
                    p2, p3 = np.exp(s[n, l, 2] - nhi), np.exp(s[n, l, 3] - nhi)
                    sums[l, 0] += p0 + p1; sums[l, 1] += p2 + p3
                    col = half*32 + n*8 + 2*t
                    ps[swz(rl, col, TC)] = bf16(p0); ps[swz(rl, col, TC) + 1] = bf16(p1)
                    ps[swz(rh, col, TC)] = bf16(p2); ps[swz(rh, col, TC) + 1] = bf16(p3)
            for l in range(0, 32, 4):
                tot = sums[l:l+4].sum(0)
                g = l >> 2
                red[2*H + half*H + hg*16 + g] = tot[0]; red[2*H + half*H + hg*16 + g + 8] = tot[1]
            new[w] = nl
        for w in range(8):
            hg, half = w & 3, w >> 2
            for l in range(32):
                g = l >> 2; rl, rh = hg*16 + g, hg*16 + g + 8
                al = np.exp(m[w][l, 0] - new[w][l, 0]); ah = np.exp(m[w][l, 1] - new[w][l, 1])
                lsum[w][l, 0] = lsum[w][l, 0]*al + red[2*H + rl] + red[3*H + rl]
                lsum[w][l, 1] = lsum[w][l, 1]*ah + red[2*H + rh] + red[3*H + rh]
                m[w][l] = new[w][l]
                o[w][:, l, 0:2] *= al; o[w][:, l, 2:4] *= ah
            for kk in range(TILE // 16):
                af = ldmatrix_x4(ps, lambda l: swz(hg*16 + ((l>>3)&1)*8 + (l&7), kk*16 + ((l>>3)>>1)*8, TC))
                for np_ in range(16):
                    bf = ldmatrix_x4(ks, lambda l: swz(kk*16 + ((l>>3)&1)*8 + (l&7), half*256 + np_*16 + ((l>>3)>>1)*8, DC), trans=True)
                    c = o[w][2*np_]; mma(c, af, bf[:, 0], bf[:, 1])
                    c = o[w][2*np_+1]; mma(c, af, bf[:, 2], bf[:, 3])
    out = np.zeros((H, D))
    for w in range(8):
        hg, half = w & 3, w >> 2
        for l in range(32):
            g, t = l >> 2, l & 3
            rl, rh = hg*16 + g, hg*16 + g + 8
            dl = lsum[w][l, 0] + np.exp(sinks[rl] - m[w][l, 0]); dh = lsum[w][l, 1] + np.exp(sinks[rh] - m[w][l, 1])
            for n in range(32):
                col = half*256 + n*8 + 2*t
                out[rl, col:col+2] = o[w][n, l, 0:2] / dl
                out[rh, col:col+2] = o[w][n, l, 2:4] / dh
    err = np.linalg.norm(out - ref) / np.linalg.norm(ref)
    print(f"nkeys {nkeys}: rel err {err:.3e}")
    return err

for nk in (1, 70, 130):
    assert run(nk) < 2e-2
