import sys, numpy as np, argparse
sys.argv=['x','t']; import w4research as R
from safetensors.numpy import load_file
W=load_file(R.HF+'/model.safetensors'); C=np.load(R.W4+'/calib.npz')
o=argparse.Namespace(group=128,clip='none',clip2d=False,z='int',lsq=0)
for i in (0,15):
  for site,n in (('attn','self_attn.q_proj'),('down','mlp.down_proj')):
    w=W[f'model.layers.{i}.{n}.weight'].astype(np.float32); H=C[f'H.{site}.{i}'].astype(np.float64)
    def L(Q): D=(w-Q).astype(np.float64); return float(np.sum((D@H)*D))
    print(i,site,'rtn',L(R.quant_matrix(w,o)),'gptq',L(R.gptq(w,C[f'H.{site}.{i}'],o)))
