import subprocess
import sys

ptx = sys.argv[1]
b = "/tmp/tv/lib/python3.11/site-packages/triton/backends/nvidia/bin/"
subprocess.run([b+"ptxas", "--gpu-name", "sm_90a", ptx, "-o", "/tmp/s23k.cubin"], check=True, capture_output=True)
out = subprocess.run([b+"nvdisasm", "-c", "/tmp/s23k.cubin"], capture_output=True, text=True).stdout
open(ptx + ".sass", "w").write(out)
lines = out.splitlines()
print(len(lines), "lines;", sum("STL" in l for l in lines), "STL;", sum("LDL" in l for l in lines), "LDL;", sum("WARPGROUP.DEPBAR" in l or "WARPGROUP.ARRIVE" in l for l in lines), "wg sync")
print("PLOP3", sum("PLOP3" in l for l in lines), "BAR", sum(" BAR." in l for l in lines), "HGMMA", sum("HGMMA" in l for l in lines))
