"""The GPU run (engine/tools/gpu_run.py) rehearsed end to end on the CPU: the same command with a
tiny configuration, a tiny corpus directory and a budget of seconds. It builds the corpus (the
held-out files and a planted version of one kept out of train), trains, writes the weights as
shards within the size limits with the log, evaluates, and the model loads with Engine.load."""
import json
import random
import subprocess
import sys

from spanfill.engine import CompletionRequest, Engine
from spanfill.engine.training.corpus import is_held_out, normalised_hash

WORDS = ["alpha", "beta", "gamma", "delta", "count", "total", "items", "value", "result", "name", "path", "size"]


def write_modules(root, n=150):
    rng = random.Random(0)
    for i in range(n):
        lines = [f'"""Module {i}: helpers for {rng.choice(WORDS)} {rng.choice(WORDS)}."""', "import os", ""]
        for j in range(rng.randint(6, 12)):
            a, b = rng.sample(WORDS, 2)
            lines += [f"def {a}_{b}_{i}_{j}({a}, {b}=None):", f"    if {b} is None:", f"        {b} = {rng.randint(0, 999)}",
                      f"    return {a} * {b} + {rng.randint(0, 99)}", ""]
        (root / f"mod_{i}.py").write_text("\n".join(lines) + "\n")


def test_the_gpu_run_command_rehearsed_on_the_cpu(tmp_path):
    src = tmp_path / "site-packages"
    src.mkdir()
    write_modules(src)
    held = [p for p in sorted(src.glob("*.py")) if is_held_out(normalised_hash(p.read_bytes()))]
    assert held
    # another release of a held-out module, vendored by some other package: one line edited
    (src / "vendor").mkdir()
    (src / "vendor" / "old_release.py").write_text(held[0].read_text().replace("import os", "import os.path"))
    out = tmp_path / "run"
    shard_limit = 200_000
    command = [sys.executable, "-m", "spanfill.engine.tools.gpu_run", "--out", str(out), "--sources", str(src),
               "--device", "cpu", "--preset", "tiny", "--batch", "4", "--no-compile", "--workers", "1",
               "--tokenizer-mb", "1", "--minutes", "0.5", "--eval-minutes", "0.1", "--single", "3", "--multi", "2",
               "--shard-mib", str(shard_limit / 2 ** 20), "--max-model-mib", "1"]
    run = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]

    log = json.loads((out / "gpu_run.json").read_text())
    assert set(log["seconds"]) == {"corpus", "tokenizer", "training", "save", "evaluation", "total"}
    assert log["training"]["steps"] >= 1 and log["training"]["tokens"] > 0
    assert {r["mode"] for r in log["evaluation"]["rows"]} == {"diffusion", "ar"}

    train = {json.loads(line)["path"] for line in (out / "data" / "train.jsonl").read_text().splitlines()}
    held_out = {json.loads(line)["path"] for line in (out / "data" / "held_out.jsonl").read_text().splitlines()}
    assert held_out == {f"{src.name}/{p.name}" for p in held} and not train & held_out
    assert f"{src.name}/vendor/old_release.py" not in train
    assert log["corpus"]["rejected"]["version of a held-out file"] == 1

    model = out / "model"
    shards = sorted(model.glob("model-*.safetensors"))
    assert len(shards) > 1 and (model / "model.safetensors.index.json").is_file()
    assert all(p.stat().st_size <= shard_limit for p in shards) and sum(p.stat().st_size for p in shards) <= 2 ** 20
    assert log["weights"]["files"] == {p.name: p.stat().st_size for p in [model / "model.safetensors.index.json", *shards]}
    steps = [json.loads(line)["step"] for line in (model / "train_log.jsonl").read_text().splitlines()]
    assert steps == list(range(1, log["training"]["steps"] + 1))
    engine = Engine.load(model, device="cpu", warmup=False, compile=False)
    assert engine.info["params"] == log["model"]["params"]
    engine.complete(CompletionRequest(prefix="def f(x):\n    return ", suffix="\n"))


def test_the_gpu_run_refuses_sources_that_are_not_directories(tmp_path):
    """A typo in --sources built an empty corpus and died in the tokenizer's sampling, device time spent."""
    proc = subprocess.run([sys.executable, "-m", "spanfill.engine.tools.gpu_run", "--out", str(tmp_path / "run"),
                           "--device", "cpu", "--sources", str(tmp_path / "typo")], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "not a directory" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "run").exists()
