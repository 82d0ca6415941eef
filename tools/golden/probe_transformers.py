# Copies the installed transformers' deepseek_v4 sources to $OUT and saves a tiny model to list its on-disk names.
import os, shutil, json, sys, traceback
import transformers
out = os.environ.get("OUT", "/tmp/out")
d = os.path.dirname(transformers.__file__)
print("transformers", transformers.__version__, d)
for f in ["models/deepseek_v4/modeling_deepseek_v4.py", "models/deepseek_v4/configuration_deepseek_v4.py", "conversion_mapping.py"]:
    p = os.path.join(d, f)
    if os.path.exists(p):
        shutil.copy(p, os.path.join(out, os.path.basename(p)))
    else:
        print("missing", p)
try:
    from transformers import DeepseekV4Config, DeepseekV4ForCausalLM
    import torch
    cfg = DeepseekV4Config()
    print(json.dumps(cfg.to_dict(), default=str)[:6000])
except Exception:
    traceback.print_exc()
