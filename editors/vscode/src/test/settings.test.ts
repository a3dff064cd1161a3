/** Unit tests for the settings mapping and status text (no VS Code needed): `npm test`. */
import { strict as assert } from "node:assert";
import { test } from "node:test";

import { Getter, languages, serverLaunch, serverSettings, statusText, statusTooltip, toggleTarget } from "../settings";

function getter(values: Record<string, unknown>): Getter {
  return <T>(key: string, fallback: T) => (key in values ? (values[key] as T) : fallback);
}

test("defaults start `spanfill serve` for Python with the server's defaults", () => {
  assert.deepEqual(serverLaunch(getter({})), { command: "spanfill", args: ["serve"], env: {} });
  assert.deepEqual(serverSettings(getter({})), {
    model: null,
    device: "auto",
    dtype: "auto",
    threads: null,
    spanLength: null,
    steps: null,
    debounceMs: 0,
    deadlineMs: null,
    enable: { "*": false, python: true },
  });
});

test("explicit settings reach the server under its names", () => {
  const settings = serverSettings(
    getter({ modelPath: " /m ", device: "cuda:1", threads: 3, spanLength: 24, steps: 4, debounceMs: 10, deadlineMs: 80, languages: ["rust", "go"] }),
  );
  assert.deepEqual(settings, {
    model: "/m",
    device: "cuda:1",
    dtype: "auto",
    threads: 3,
    spanLength: 24,
    steps: 4,
    debounceMs: 10,
    deadlineMs: 80,
    enable: { "*": false, rust: true, go: true },
  });
});

test("cleared counts are sent as null so the server goes back to the model's default", () => {
  const settings = serverSettings(getter({ spanLength: 0, steps: null, threads: 0, deadlineMs: 0 }));
  assert.equal(settings.spanLength, null);
  assert.equal(settings.deadlineMs, null);
  assert.equal(settings.threads, null);
  assert.equal(settings.steps, null);
  assert.deepEqual(languages(getter({ languages: [""] })), ["python"]);
});

test("toggled off turns every language off in the server", () => {
  assert.deepEqual(serverSettings(getter({ enable: false, languages: ["python", "c"] })).enable, {
    "*": false,
    python: false,
    c: false,
  });
});

test("status text shows model name, device and the last latency", () => {
  const status = { state: "ready" as const, model: "/opt/spanfill/default_model/", device: "cpu", latencyMs: { last: 41.6 } };
  assert.equal(statusText(status, 90), "$(sparkle) default_model · cpu · 42 ms");
  assert.equal(statusText({ state: "ready", model: "m", device: "cuda:0" }, 12), "$(sparkle) m · cuda:0 · 12 ms");
  assert.equal(statusText({ state: "loading" }, undefined), "$(loading~spin) spanfill: loading model");
  assert.equal(statusText({ state: "failed", error: "no such file" }, undefined), "$(error) spanfill: no model");
});

test("a public checkpoint shows its family in the status text and the tooltip", () => {
  const status = { state: "ready" as const, model: "/models/DiffuCoder-7B-Base", family: "dream", device: "cuda:0" };
  assert.equal(statusText(status, 35), "$(sparkle) DiffuCoder-7B-Base (dream) · cuda:0 · 35 ms");
  assert.equal(statusText({ ...status, model: "m", family: "spanfill" }, 35), "$(sparkle) m · cuda:0 · 35 ms");
  assert.match(statusTooltip(status), /model: \/models\/DiffuCoder-7B-Base \(family: dream\)/);
});

test("the tooltip counts accepted suggestions and claims no acceptance rate VS Code cannot know", () => {
  const tooltip = statusTooltip({ state: "ready", accepted: 3, rejected: 0, acceptanceRate: 1 });
  assert.match(tooltip, /suggestions accepted: 3/);
  assert.doesNotMatch(tooltip, /rejected|100/);
});

test("the tooltip names the device, dtype and CPU threads", () => {
  assert.match(statusTooltip({ state: "ready", device: "cpu", dtype: "bfloat16", threads: 1 }), /device: cpu \(bfloat16, 1 CPU thread\)/);
  assert.match(statusTooltip({ state: "ready", device: "cpu", dtype: "float32", threads: 3 }), /\(float32, 3 CPU threads\)/);
  assert.match(statusTooltip({ state: "ready", device: "cpu", dtype: "float32", int8Matmuls: true, threads: 1 }),
    /\(float32 with int8 matmuls, 1 CPU thread\)/);
  assert.match(statusTooltip({ state: "ready", device: "cuda:0", dtype: "bfloat16" }), /device: cuda:0 \(bfloat16\)/);
});

test("the toggle writes the layer whose value is in effect", () => {
  assert.equal(toggleTarget(undefined), "global");
  assert.equal(toggleTarget({}), "global");
  assert.equal(toggleTarget({ workspaceValue: false }), "workspace");
  assert.equal(toggleTarget({ workspaceValue: true }), "workspace");
});
