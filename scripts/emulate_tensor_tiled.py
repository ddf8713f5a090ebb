#!/usr/bin/env python3
# Checks algorithms/23_tensor_3xtf32.cu without a GPU: a line-by-line emulation of its staging, per-lane
# fragment gathers and store (rights NT=1,2 and rows modes), one-to-many shapes, against scipy.
# Run: python3 scripts/emulate_tensor_tiled.py (about a minute). It passed before any GPU run.
# CPU emulation of tensor_tiled_kernel's index math (float64, no TF32 rounding): staging, fragment
# gathers per lane, m16n8k8 via the PTX fragment layouts, the store. One pair group per block.
import sys
USAGE = "usage: python3 scripts/emulate_tensor_tiled.py   (no arguments: checks algorithms/23_tensor_3xtf32.cu's index math against scipy, about a minute)"
if sys.argv[1:]:  # it took no arguments and ran the minute-long check on --help too
    print(USAGE, file=sys.stdout if sys.argv[1] in ("-h", "--help") else sys.stderr)
    sys.exit(0 if sys.argv[1] in ("-h", "--help") else 2)
import numpy as np
from scipy.signal import correlate2d
KR,KS,KC,MT,TDX,LP,NP=4,4,32,2,32,64,7
def cdiv(a,b): return -(-a//b)
def us(d0,d1,m,n): return (max(0,-d1),min(n,m-d0))
def lus(d0,d1,m,n): return (max(0,d0),min(m,n+d1))
def run(L,Rs,mode,NT):
    hL,wL=L.shape; M,hR,wR=Rs.shape
    DY=2 if mode==0 else 1; WDY=DY if mode==0 else 8*NT; TDY=4*WDY
    LROWS=KR+TDY-1 if mode==0 else KR; NS=8*NT if mode==0 else 1; SS=KR*KC+4
    RROWS=KR if mode==0 else KR+TDY-1; RP=KC+4; PAIRS=NS if mode==0 else 1
    oh,ow=hL+hR-1,wL+wR-1; out=np.full((M,oh,ow),np.nan)
    for ty in range(cdiv(oh,TDY)):
     for tx in range(cdiv(ow,TDX)):
      for gj in range(cdiv(M,PAIRS)):
        j0=gj*PAIRS; y0,x0=ty*TDY,tx*TDX; dyb,dxb=y0-(hR-1),x0-(wR-1)
        dl,xl=min(dyb+TDY-1,hL-1),min(dxb+TDX-1,wL-1)
        rB=us(dyb,dl,hL,hR) if mode==0 else lus(dyb,dl,hL,hR); cB=us(dxb,xl,wL,wR)
        ncc=cdiv(cB[1]-cB[0],KC); nch=cdiv(rB[1]-rB[0],KR)*ncc
        acc=np.zeros((4,32,DY,MT,NT,4))
        for k in range(nch):
          r0=rB[0]+(k//ncc)*KR; c0=cB[0]+(k%ncc)*KC
          Ls=np.zeros(LROWS*LP); Rsm=np.zeros(NS*SS if mode==0 else RROWS*RP)
          for q in range(LROWS):
            for lc in range(LP):
              r=r0+(dyb if mode==0 else 0)+q; c=c0+dxb+lc
              if 0<=r<hL and 0<=c<wL: Ls[q*LP+lc]=L[r,c]
          if mode==0:
            for s in range(NS):
              for rr in range(KR):
                for cc in range(KC):
                  r,c=r0+rr,c0+cc
                  if r<hR and c<wR and j0+s<M: Rsm[s*SS+rr*KC+cc]=Rs[j0+s,r,c]
          else:
            for q in range(RROWS):
              for cc in range(KC):
                r=r0-dyb-(TDY-1)+q; c=c0+cc
                if 0<=r<hR and c<wR: Rsm[q*RP+cc]=Rs[j0,r,c]
          for w in range(4):
            dyl=w*WDY; dyw=dyb+dyl
            if dyw>hL-1: rW=(0,0)
            else: rW=(us if mode==0 else lus)(dyw,min(dyw+WDY-1,hL-1),hL,hR)
            for rr in range(max(0,rW[0]-r0),min(KR,rW[1]-r0)):
              for s in range(KS):
                for d in range(DY):
                  for m in range(MT):
                    for n in range(NT):
                      A=np.zeros((16,8)); B=np.zeros((8,8))
                      for lane in range(32):
                        g,t=lane>>2,lane&3
                        lrow=((rr+dyl+d) if mode==0 else rr)*LP+g+t
                        P=lambda q,h: Ls[lrow+8*q+4*h]
                        q=s+2*m
                        a=[P(q,0),P(q+1,0),P(q,1),P(q+1,1)]
                        A[g,t],A[g+8,t],A[g,t+4],A[g+8,t+4]=a
                        bp=(g*SS+rr*KC+t) if mode==0 else ((rr+TDY-1-dyl-g)*RP+t)
                        BNT=8*SS if mode==0 else -8*RP
                        B[t,g]=Rsm[bp+n*BNT+8*s]; B[t+4,g]=Rsm[bp+n*BNT+8*s+4]
                      C=A@B
                      for lane in range(32):
                        g,t=lane>>2,lane&3
                        acc[w,lane,d,m,n]+= [C[g,2*t],C[g,2*t+1],C[g+8,2*t],C[g+8,2*t+1]]
        for w in range(4):
         dyl=w*WDY
         for lane in range(32):
          g,t=lane>>2,lane&3
          for d in range(DY):
           for m in range(MT):
            for n in range(NT):
             for v in range(4):
              x=x0+16*m+g+(8 if v>=2 else 0); nn=2*t+(v&1)
              j=j0+8*n+nn if mode==0 else j0; y=y0+dyl+(d if mode==0 else 8*n+nn)
              if j<M and y<oh and x<ow: out[j,y,x]=acc[w,lane,d,m,n,v]
    return out
rng=np.random.default_rng(1)
for (hL,wL,hR,wR,M) in [(1,1,1,1,1),(5,7,3,2,3),(3,5,1,1,2),(13,1,7,1,9),(17,23,9,31,2),(33,7,5,40,1),(24,24,40,37,1)]:
  L=rng.random((hL,wL)); Rs=rng.random((M,hR,wR))
  ref=np.stack([correlate2d(L,Rs[j],mode='full') for j in range(M)])
  for mode,NT in [(0,1),(0,2),(1,1)]:
    o=run(L,Rs,mode,NT); err=np.abs(o-ref).max() if not np.isnan(o).any() else float('nan')
    print((hL,wL,hR,wR,M),mode,NT,err, 'OK' if err<1e-9 else 'FAIL')
