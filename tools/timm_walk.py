"""A walk over timm's CNN families (issue 30's measure): each model, with random weights and
10 classes, exported by torch.onnx.export (opset 17, eval mode, TorchScript exporter) at a
small input, then imported by dtnn: whether it imports, whether `dtnn predict` matches
onnxruntime (graph optimisations off) within 1e-4 (max |a - b| / max |b|), and whether `dtnn train --model F.onnx`
runs 2 steps on 1 rank and on 2 ranks. Needs a venv with torch 2.x, timm, onnx and
onnxruntime (pip); prints one line per model and a summary.

    VENV/bin/python tools/timm_walk.py BUILD_DIR OUT_DIR [--size 96] [--models a,b,...]
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np

# One model per family (timm 1.0 names), the CNN families the issue counts.
FAMILIES = [
    "resnet18", "resnet26d", "resnext26ts", "seresnext26d_32x4d", "ecaresnet26t",
    "resnest14d", "res2net50_14w_8s", "res2next50", "regnetx_002", "regnety_002",
    "regnetz_005", "efficientnet_b0", "efficientnetv2_rw_t", "tf_efficientnetv2_b0",
    "mobilenetv2_050", "mobilenetv3_small_050", "mobilenetv4_conv_small", "lcnet_050",
    "tinynet_e", "hardcorenas_a", "mnasnet_050", "fbnetc_100", "spnasnet_100", "mixnet_s",
    "ghostnet_100", "ghostnetv2_100", "rexnet_100", "dla34", "dpn48b", "densenet121",
    "vgg11", "repvgg_a0", "cspresnet50", "cspdarknet53", "darknet17", "cs3darknet_s",
    "hrnet_w18_small", "vovnet39a", "ese_vovnet19b_dw", "selecsls42b", "dla46_c",
    "convnext_atto", "convnextv2_atto", "nf_resnet26", "nfnet_f0", "gernet_s", "resnetrs50",
    "skresnet18", "botnet26t_256", "halonet26t", "lambda_resnet26t", "efficientformer_l1",
    "mobilevit_xxs", "xception41",
]


# Models that export only at the size they were built for: fixed attention windows and
# position tensors (BoTNet, HaloNet, EfficientFormer), and VGG's adaptive pool to 7x7, which
# torch.onnx exports only where 7 divides the last feature map. MobileViT at its own 256:
# below that its last stage's 3x3 map is resized to 4x4 (a bilinear Resize by 4/3) to cut
# 2x2 patches.
NATIVE_SIZE = {"botnet26t_256": 256, "halonet26t": 256, "efficientformer_l1": 224, "vgg11": 224,
               "mobilevit_xxs": 256}


def run(cmd, timeout=600):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def walk_one(name, build, out, size):
    import onnxruntime
    import timm
    import torch
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    # the same random weights and input every walk: a random network's logits can nearly
    # cancel, where max |a - b| / max |b| swings from run to run (efficientnetv2_rw_t: 6.5e-6
    # to 4.0e-4 over three unseeded walks)
    torch.manual_seed(0)
    try:
        model = timm.create_model(name, pretrained=False, num_classes=10).eval()
        x = torch.randn(2, 3, size, size)
        with torch.no_grad():
            torch.onnx.export(model, x, path, opset_version=17, dynamo=False,
                              input_names=["input"], output_names=["output"],
                              dynamic_axes={"input": {0: "n"}, "output": {0: "n"}})
    except Exception as e:  # noqa: BLE001 -- a model that does not export is counted so
        return "no export", str(e).splitlines()[0][:120]
    xn = x.numpy()
    np.save(os.path.join(d, "x.npy"), xn)
    # onnxruntime without its graph optimisations: each operator as the graph writes it. Its
    # fusions round otherwise, and on a randomly initialised network with folded batch norms
    # (logits near 1000) that moved efficientnetv2_rw_t's logits by 1.6e-4 of their largest
    # against ORT's own unoptimised run, past the walk's 1e-4.
    so = onnxruntime.SessionOptions()
    so.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    ref = onnxruntime.InferenceSession(path, so).run(None, {"input": xn})[0]
    dtnn = os.path.join(build, "dtnn")
    r = run([dtnn, "predict", "--model", path, "--input", os.path.join(d, "x.npy"),
             "--output", os.path.join(d, "dtnn.npy"), "--threads", "2"])
    if r.returncode:
        return "refused", (r.stderr.strip().splitlines() or ["?"])[-1][:160]
    got = np.load(os.path.join(d, "dtnn.npy")).reshape(ref.shape)
    rel = float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))
    if not rel <= 1e-4:
        return "mismatch", f"{rel:.3g}"
    rng = np.random.default_rng(0)
    np.save(os.path.join(d, "train_x.npy"), rng.standard_normal((8, 3, size, size)).astype(
        np.float32))
    np.save(os.path.join(d, "train_y.npy"), np.arange(8) % 10)
    # Clipped: an eval-mode export has its batch norms folded, so an untrained network with
    # random weights starts far from any normalised scale (efficientnetv2_rw_t's loss is 672)
    # and an unclipped step can overflow; the walk asks whether the graph trains, not the rate.
    common = ["train", "--model", path, "--dataset", "npy", "--data-dir", d, "--steps", "2",
              "--batch-size", "4", "--lr", "0.001", "--clip-grad-norm", "1", "--quiet"]
    r1 = run([dtnn] + common + ["--threads", "2"])
    r2 = run([os.path.join(build, "tests", "mpirun"), "-np", "2", dtnn] + common +
             ["--threads", "1"])
    trains = ("1 rank" if not r1.returncode else "") + \
             (" and 2 ranks" if not r2.returncode else "")
    if r1.returncode or r2.returncode:
        err = (r1.stderr or r2.stderr).strip().splitlines()
        return "matches, training fails", f"{rel:.3g}; {(err or ['?'])[-1][:120]}"
    return "trains", f"{rel:.3g}, 2 steps on {trains.strip()}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build")
    ap.add_argument("out")
    ap.add_argument("--size", type=int, default=96)
    ap.add_argument("--models", default=",".join(FAMILIES))
    a = ap.parse_args()
    counts = {}
    for name in a.models.split(","):
        t0 = time.time()
        try:
            status, detail = walk_one(name, a.build, a.out, NATIVE_SIZE.get(name, a.size))
        except Exception as e:  # noqa: BLE001
            status, detail = "error", f"{type(e).__name__}: {str(e)[:120]}"
        counts[status] = counts.get(status, 0) + 1
        print(f"{name:28s} {status:24s} {detail} ({time.time() - t0:.0f} s)", flush=True)
    print("summary:", ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


if __name__ == "__main__":
    sys.exit(main())
