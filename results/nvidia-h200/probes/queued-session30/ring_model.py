# model of run_ring's enumeration (n-to-m and others), checking every output once and spectra slots
import itertools
def ntom(nL, nR, K, S, lefts):
    seen = {}
    for j0 in range(0, nR, K):
        kc = min(K, nR - j0)
        spec0 = nL  # chunk's rights at slots nL..nL+kc
        li = min(nL, lefts, S); kb = max(1, min(kc, S // li))
        for i0 in range(0, nL, li):
            for j in range(0, kc, kb):
                ni = min(li, nL - i0); nj = min(kb, kc - j)
                base = i0; sp0 = spec0 + j - i0
                count = ni * nj
                assert count <= S
                for s in range(count):
                    pi, jj = divmod(s, nj)
                    left_slot = base + pi; right_slot = base + sp0 + jj
                    out = (i0 + pi) * nR + (j0 + j) + jj  # out base shift i0*nR, chunk_output = pi*nR + j0' + jj
                    left, right = divmod(out, nR)
                    assert left_slot == left, (left_slot, left)
                    assert right_slot == nL + (right - j0), (right_slot, right)
                    assert out not in seen; seen[out] = 1
    assert len(seen) == nL * nR
def other(n, K, S):
    seen = set()
    for j0 in range(0, n, K):
        kc = min(K, n - j0)
        for j in range(0, kc, S):
            cnt = min(S, kc - j)
            for s in range(cnt):
                o = j0 + j + s; assert o not in seen; seen.add(o)
    assert seen == set(range(n))
for nL, nR, K, S, lefts in itertools.product([1,2,3,7,8,9,32],[1,2,3,5,32],[1,2,3,32],[1,2,3,5,8,16],[1,2,8]):
    ntom(nL, nR, min(K, nR), S, lefts)
for n, K, S in itertools.product([1,2,3,13,32],[1,2,3,32],[1,2,3,8]):
    other(n, min(K,n), S)
print("ok")
